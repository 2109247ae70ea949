pub mod limits;
pub fn connect() {}
