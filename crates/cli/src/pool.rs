//! The CLI's progress bars over the library's work (`schedlab_scenarios::pool`
//! spreads it; `schedlab_validate::Progress` reports it).

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressStyle};

/// A progress bar of `len` steps on standard error, when it is a terminal
/// and the environment is not CI; else a hidden one.
pub fn progress(len: usize, what: &str) -> ProgressBar {
    if !std::io::stderr().is_terminal() || std::env::var_os("CI").is_some() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(len as u64);
    bar.set_style(
        ProgressStyle::with_template("{prefix} [{bar:40}] {pos}/{len} runs, {eta} left")
            .expect("a valid template")
            .progress_chars("=> "),
    );
    bar.set_prefix(what.to_string());
    bar
}

/// A library's [`schedlab_validate::Progress`] shown as one bar per stage.
#[derive(Default)]
pub struct Bar(std::sync::Mutex<Option<ProgressBar>>);

impl schedlab_validate::Progress for Bar {
    fn begin(&self, what: &str, len: usize) {
        *self.0.lock().expect("not poisoned") = Some(progress(len, what));
    }

    fn tick(&self) {
        if let Some(b) = &*self.0.lock().expect("not poisoned") {
            b.inc(1);
        }
    }

    fn end(&self) {
        if let Some(b) = self.0.lock().expect("not poisoned").take() {
            b.finish_and_clear();
        }
    }
}
