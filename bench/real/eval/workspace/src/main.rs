mod auth;

#[tokio::main]
async fn main() {
    let hash = auth::hash_password("correct horse");
    println!("{hash}");
}
