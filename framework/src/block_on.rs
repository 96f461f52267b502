//! Waiting for a future on the calling thread, which parks between polls: what opening a wgpu
//! device ([`crate::device`]) and the engine's completion watcher ([`crate::engine`]) both do
//! with burn's and wgpu's futures, ember having no async runtime. Below both, so that neither
//! reaches into the other for it.

use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};

/// A waker that unparks the thread that made it, the one waiting for the future.
pub(crate) struct Unpark(pub(crate) Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// Drives one future to completion on this thread, parking between polls.
pub(crate) fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    let waker = Waker::from(Arc::new(Unpark(thread::current())));
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        thread::park();
    }
}
