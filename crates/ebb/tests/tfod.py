"""An HTTP/1.1 origin for tests/srvopts.rs's TCP fast open test.

  tfod.py PORT    listens on 127.0.0.1:PORT with TCP_FASTOPEN (the
                  server side of TCP fast open), prints "ready"; serves
                  until killed

Each connection: the request head read, the answer is 200 with the body
`syn_data=1` when the connection's first bytes came in its SYN (the
kernel's TCP_INFO option TCPI_OPT_SYN_DATA), else `syn_data=0`; then
the connection closes.
"""

import socket
import struct
import sys

TCPI_OPT_SYN_DATA = 0x20


def main():
    port = int(sys.argv[1])
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.setsockopt(socket.IPPROTO_TCP, socket.TCP_FASTOPEN, 16)
    ls.bind(("127.0.0.1", port))
    ls.listen(64)
    print("ready", flush=True)
    while True:
        c, _ = ls.accept()
        info = c.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
        # struct tcp_info: state, ca_state, retransmits, probes, backoff,
        # options (u8 each).
        opts = struct.unpack_from("B", info, 5)[0]
        syn = 1 if opts & TCPI_OPT_SYN_DATA else 0
        data = b""
        while b"\r\n\r\n" not in data:
            x = c.recv(65536)
            if not x:
                break
            data += x
        body = b"syn_data=%d" % syn
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body))
        c.close()


if __name__ == "__main__":
    main()
