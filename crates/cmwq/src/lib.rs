//! cmwq: the Linux kernel's concurrency-managed workqueue, in user space.

pub mod topology;
