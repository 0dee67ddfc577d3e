mod capture;
mod discovery;
mod events;
mod instance;
mod stale;
pub mod util;
