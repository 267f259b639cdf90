//! The mode of these tests' own process (ADR-0080): as root, root mode (nothing to do); as an
//! ordinary user (`cargo xtask vm --tests corral-linux --as-user`), rootless mode, entered as
//! corral's `main` and any embedder do: `choose_mode` while the process has one thread, which
//! for a test binary means before the test harness's `main` starts its threads, so from an ELF
//! constructor.

extern "C" fn enter_mode() {
    corral_linux::rootless::choose_mode();
}

#[allow(
    unsafe_code,
    reason = "an ELF constructor: the one way to run before libtest's threads"
)]
// SAFETY: `.init_array` entries are called once by the loader with no arguments before
// `main`, which is what `enter_mode`'s signature is; it only forks, reads and writes files and
// unshares namespaces, all valid before `main` (glibc is initialised first).
#[used]
#[unsafe(link_section = ".init_array")]
static ENTER_MODE: extern "C" fn() = enter_mode;
