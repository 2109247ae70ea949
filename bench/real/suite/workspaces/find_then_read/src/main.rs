mod net;
fn main() {
    net::connect();
}
