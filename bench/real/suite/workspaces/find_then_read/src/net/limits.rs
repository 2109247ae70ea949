/// How often a request is retried.
pub const MAX_RETRIES: u32 = 7;
pub const BACKOFF_MS: u64 = 250;
