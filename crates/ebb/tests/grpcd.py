"""gRPC server and client for tests/h2server.rs (Debian's python3-grpcio).

Generic handlers on raw bytes (no protoc, no generated code):

  /test.Echo/Unary   answers b"echo:" + the request
  /test.Echo/Stream  the request is a count N: answers N messages "part I"
  /test.Echo/Fail    ends with PERMISSION_DENIED "no entry" (trailers only)

  grpcd.py serve            prints "port N", serves until killed
  grpcd.py call HOST:PORT   runs every call, prints one line per result
"""

import sys
from concurrent import futures

import grpc


def unary(req, ctx):
    return b"echo:" + req


def stream(req, ctx):
    for i in range(int(req.decode())):
        yield ("part %d" % i).encode()


def fail(req, ctx):
    ctx.abort(grpc.StatusCode.PERMISSION_DENIED, "no entry")


def serve():
    handlers = {
        "Unary": grpc.unary_unary_rpc_method_handler(unary),
        "Stream": grpc.unary_stream_rpc_method_handler(stream),
        "Fail": grpc.unary_unary_rpc_method_handler(fail),
    }
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler("test.Echo", handlers),)
    )
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print("port %d" % port, flush=True)
    server.wait_for_termination()


def call(target):
    with grpc.insecure_channel(target) as ch:
        u = ch.unary_unary("/test.Echo/Unary")
        print("unary", u(b"hello", timeout=60).decode(), flush=True)
        big = bytes(range(256)) * 4096  # 1 MiB, both ways
        back = u(big, timeout=60)
        print("big", len(back), back == b"echo:" + big, flush=True)
        s = ch.unary_stream("/test.Echo/Stream")
        parts = [p.decode() for p in s(b"200", timeout=60)]
        print("stream", len(parts), parts[0], parts[-1], flush=True)
        f = ch.unary_unary("/test.Echo/Fail")
        try:
            f(b"x", timeout=60)
            print("fail none", flush=True)
        except grpc.RpcError as e:
            print("fail", e.code().name, e.details(), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve()
    else:
        call(sys.argv[2])
