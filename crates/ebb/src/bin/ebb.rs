fn main() {
    println!("ebb {}", env!("CARGO_PKG_VERSION"));
}
