//! Integration tests on the running kernel. They need root and tracefs (CI runs as root) and
//! fail loudly when tracefs is missing. Each uses its own private instance, removed on drop.

mod it;
