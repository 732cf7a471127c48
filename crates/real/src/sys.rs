//! The kernel calls the executor makes, each a thin wrapper that turns a
//! failure into an `io::Error`. Every `unsafe` block of the crate that is
//! not about the shared mapping (`shm.rs`) is here, each with the reason it
//! is sound.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

/// `-1` from a call into the `errno` it set.
fn check(r: libc::c_long) -> io::Result<libc::c_long> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn clock(id: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; both clocks always exist
    // on Linux, so the call cannot fail.
    unsafe { libc::clock_gettime(id, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// `CLOCK_MONOTONIC`, ns (the clock laps and the trace's `mono` clock read).
pub fn now() -> u64 {
    clock(libc::CLOCK_MONOTONIC)
}

/// This thread's CPU time, ns (`CLOCK_THREAD_CPUTIME_ID`).
pub fn thread_cpu_ns() -> u64 {
    clock(libc::CLOCK_THREAD_CPUTIME_ID)
}

fn timespec(ns: u64) -> libc::timespec {
    libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    }
}

/// Sleeps `ns` (`clock_nanosleep`, relative), resumed after a signal.
pub fn sleep_ns(ns: u64) {
    sleep_until(now().saturating_add(ns));
}

/// Sleeps until `CLOCK_MONOTONIC` reads `at` (`clock_nanosleep` with
/// `TIMER_ABSTIME`).
pub fn sleep_until(at: u64) {
    let ts = timespec(at);
    loop {
        // SAFETY: `ts` is a valid timespec; the remainder pointer may be
        // null with TIMER_ABSTIME.
        let r = unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &ts,
                std::ptr::null_mut(),
            )
        };
        if r != libc::EINTR {
            return;
        }
    }
}

/// `FUTEX_WAIT` on a word that may be shared between processes (so not
/// the `_PRIVATE` op): sleeps while `word == expected`, at most `timeout`
/// ns when given. Returns when woken, when the word differs, on a signal
/// or at the timeout: callers re-check their condition.
pub fn futex_wait(word: &AtomicU32, expected: u32, timeout: Option<u64>) {
    let ts = timeout.map(timespec);
    let tp = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `word` is a live, aligned u32 for the whole call (a
    // reference); the kernel only reads it. `tp` is null or points at
    // `ts`, which outlives the call.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            expected,
            tp,
            std::ptr::null::<u32>(),
            0u32,
        )
    };
}

/// `FUTEX_WAKE`: wakes up to `n` waiters of `word`; how many it woke.
pub fn futex_wake(word: &AtomicU32, n: u32) -> usize {
    let n = n.min(i32::MAX as u32) as libc::c_int;
    // SAFETY: as in `futex_wait`; FUTEX_WAKE reads no other argument.
    let r = unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE,
            n,
            std::ptr::null::<libc::timespec>(),
            std::ptr::null::<u32>(),
            0u32,
        )
    };
    r.max(0) as usize
}

/// This thread's kernel id.
pub fn gettid() -> i32 {
    // SAFETY: gettid takes no arguments and cannot fail.
    unsafe { libc::gettid() }
}

/// The CPU this thread runs on now.
pub fn current_cpu() -> usize {
    // SAFETY: sched_getcpu takes no arguments; it fails only on kernels
    // without the call, where -1 reads as CPU 0.
    unsafe { libc::sched_getcpu() }.max(0) as usize
}

/// Pins the calling thread to `cpus` (`sched_setaffinity`).
pub fn set_affinity(cpus: &[usize]) -> io::Result<()> {
    // SAFETY: cpu_set_t is plain bits; zeroed is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        // SAFETY: CPU_SET writes one bit of `set`; `c` is checked against
        // CPU_SETSIZE by the caller's topology (at most 1024 CPUs).
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    // SAFETY: `set` is a valid cpu_set_t of the size passed; 0 names the
    // calling thread.
    let r = unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) };
    check(r as libc::c_long).map(drop)
}

/// The calling thread's nice (`setpriority(PRIO_PROCESS, tid, n)`: on
/// Linux a thread's own).
pub fn set_nice(n: i8) -> io::Result<()> {
    // SAFETY: plain integers.
    let r = unsafe { libc::setpriority(libc::PRIO_PROCESS, gettid() as libc::id_t, n as i32) };
    check(r as libc::c_long).map(drop)
}

/// The calling thread into `SCHED_FIFO` at `prio` (needs CAP_SYS_NICE).
pub fn set_fifo(prio: u8) -> io::Result<()> {
    let p = libc::sched_param {
        sched_priority: prio as i32,
    };
    // SAFETY: `p` is a valid sched_param; 0 names the calling thread.
    let r = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) };
    check(r as libc::c_long).map(drop)
}

/// `struct sched_attr` as `sched_setattr(2)` defines it (version 1, 56
/// bytes; the utilization clamps unused).
#[repr(C)]
#[derive(Default)]
struct SchedAttr {
    size: u32,
    policy: u32,
    flags: u64,
    nice: i32,
    priority: u32,
    runtime: u64,
    deadline: u64,
    period: u64,
    util_min: u32,
    util_max: u32,
}

/// The calling thread's fair-class slice: `sched_setattr` with
/// `SCHED_OTHER` and `sched_runtime = ns` (EEVDF takes it as the slice
/// since Linux 6.12; an older kernel refuses it).
pub fn set_slice(ns: u64, nice: i8) -> io::Result<()> {
    let a = SchedAttr {
        size: std::mem::size_of::<SchedAttr>() as u32,
        policy: libc::SCHED_OTHER as u32,
        nice: nice as i32,
        runtime: ns,
        ..SchedAttr::default()
    };
    // SAFETY: `a` is a valid sched_attr whose size field says its size;
    // 0 names the calling thread; flags 0.
    let r = unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &a as *const SchedAttr, 0) };
    check(r).map(drop)
}

const PR_SCHED_CORE: libc::c_int = 62;
const PR_SCHED_CORE_GET: libc::c_ulong = 0;
const PR_SCHED_CORE_CREATE: libc::c_ulong = 1;
const PR_SCHED_CORE_SHARE_FROM: libc::c_ulong = 3;
/// `PIDTYPE_PID`: the call applies to one thread.
const PIDTYPE_PID: libc::c_ulong = 0;

/// Whether this kernel has core scheduling (`CONFIG_SCHED_CORE`): a
/// `PR_SCHED_CORE_GET` of our own cookie succeeds.
pub fn has_core_sched() -> bool {
    let mut cookie: u64 = 0;
    // SAFETY: PR_SCHED_CORE_GET writes one u64 to the address given,
    // which is `cookie`.
    let r = unsafe {
        libc::prctl(
            PR_SCHED_CORE,
            PR_SCHED_CORE_GET,
            0 as libc::c_ulong,
            PIDTYPE_PID,
            &mut cookie as *mut u64,
        )
    };
    r == 0
}

/// A new core-scheduling cookie for the calling thread.
pub fn core_cookie_create() -> io::Result<()> {
    // SAFETY: integer arguments only.
    let r = unsafe {
        libc::prctl(
            PR_SCHED_CORE,
            PR_SCHED_CORE_CREATE,
            0 as libc::c_ulong,
            PIDTYPE_PID,
            0 as libc::c_ulong,
        )
    };
    check(r as libc::c_long).map(drop)
}

/// The calling thread takes thread `tid`'s cookie.
pub fn core_cookie_share_from(tid: i32) -> io::Result<()> {
    // SAFETY: integer arguments only.
    let r = unsafe {
        libc::prctl(
            PR_SCHED_CORE,
            PR_SCHED_CORE_SHARE_FROM,
            tid as libc::c_ulong,
            PIDTYPE_PID,
            0 as libc::c_ulong,
        )
    };
    check(r as libc::c_long).map(drop)
}

/// `sched_yield`.
pub fn yield_now() {
    // SAFETY: no arguments; it cannot fail on Linux.
    unsafe { libc::sched_yield() };
}

/// A pipe holding at least `capacity` bytes (`F_SETPIPE_SZ`, which the
/// kernel rounds up to a power of two pages): (read end, write end).
pub fn pipe(capacity: u64) -> io::Result<(i32, i32)> {
    let mut fds = [0i32; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    check(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } as libc::c_long)?;
    let size = capacity.clamp(4096, 1 << 20) as libc::c_int;
    // SAFETY: F_SETPIPE_SZ takes an int; `fds[1]` is the pipe just made.
    let r = unsafe { libc::fcntl(fds[1], libc::F_SETPIPE_SZ, size) };
    if r < 0 {
        let e = io::Error::last_os_error();
        close(fds[0]);
        close(fds[1]);
        return Err(e);
    }
    Ok((fds[0], fds[1]))
}

pub fn close(fd: i32) {
    // SAFETY: closing a descriptor this crate opened and owns.
    unsafe { libc::close(fd) };
}

/// Writes all of `buf` to `fd`, resuming after partial writes and signals.
pub fn write_all(fd: i32, mut buf: &[u8]) -> io::Result<()> {
    while !buf.is_empty() {
        // SAFETY: `buf` is valid for reads of its length.
        let r = unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        buf = &buf[r as usize..];
    }
    Ok(())
}

/// One `read(2)` into `buf`, retried when a signal interrupts it: the
/// bytes read (0 at end of file).
fn read_some(fd: i32, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        // SAFETY: `buf` is valid for writes of its length.
        let r = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if r >= 0 {
            return Ok(r as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Reads exactly `buf.len()` bytes from `fd` (a pipe read of N bytes
/// waits for all N, as the simulator's does). `Ok(false)` at end of file.
pub fn read_exact(fd: i32, buf: &mut [u8]) -> io::Result<bool> {
    let mut got = 0;
    while got < buf.len() {
        match read_some(fd, &mut buf[got..])? {
            0 => return Ok(false),
            n => got += n,
        }
    }
    Ok(true)
}

/// Reads `fd` to its end.
pub fn read_to_end(fd: i32) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = [0u8; 65536];
    loop {
        match read_some(fd, &mut buf)? {
            0 => return Ok(out),
            n => out.extend_from_slice(&buf[..n]),
        }
    }
}

/// `pread` of `buf.len()` bytes at `offset`.
pub fn pread(fd: i32, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    // SAFETY: `buf` is valid for writes of its length.
    let r = unsafe {
        libc::pread(
            fd,
            buf.as_mut_ptr().cast(),
            buf.len(),
            offset as libc::off_t,
        )
    };
    check(r as libc::c_long).map(|n| n as usize)
}

/// Forks. In the child, `PR_SET_PDEATHSIG` makes the kernel kill it if the
/// parent dies first, so no process outlives a run however it ends.
pub fn fork() -> io::Result<Option<i32>> {
    // SAFETY: the child runs only this crate's code, which allocates
    // (glibc's fork resets the allocator's locks) and makes syscalls; it
    // takes no lock another thread of the parent could hold, and leaves
    // through `exit_now`, never returning into the caller's stack.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid == 0 {
        // SAFETY: integer arguments only.
        unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) };
        return Ok(None);
    }
    Ok(Some(pid))
}

/// Forks from a task's thread (a `fork` op). `PR_SET_PDEATHSIG` fires
/// when the forking *thread* ends, and a task's thread ends only with its
/// process (`exec::start`), so the child dies with its parent process.
/// A child whose parent was gone before its `prctl` exits at once.
pub fn fork_task() -> io::Result<Option<i32>> {
    let parent = std::process::id() as i32;
    let r = fork()?;
    if r.is_none() && parent_pid() != parent {
        exit_now(1);
    }
    Ok(r)
}

/// Runs `f` on a new thread made as a C program makes one
/// (`pthread_create` with glibc's default attributes: no Rust runtime, no
/// signal stack), and joins it.
pub fn pthread_run(f: extern "C" fn(*mut libc::c_void) -> *mut libc::c_void) -> io::Result<()> {
    let mut t: libc::pthread_t = 0;
    // SAFETY: `t` is written by pthread_create; null attributes are the
    // defaults; `f` is a plain function that ignores its null argument.
    let r = unsafe { libc::pthread_create(&mut t, std::ptr::null(), f, std::ptr::null_mut()) };
    if r != 0 {
        return Err(io::Error::from_raw_os_error(r));
    }
    // SAFETY: `t` is the joinable thread just made; its result is ignored.
    let r = unsafe { libc::pthread_join(t, std::ptr::null_mut()) };
    if r != 0 {
        return Err(io::Error::from_raw_os_error(r));
    }
    Ok(())
}

/// The parent process's pid (`getppid`): it changes when the parent dies.
pub fn parent_pid() -> i32 {
    // SAFETY: no arguments.
    unsafe { libc::getppid() }
}

/// Ends the calling process at once (`_exit`: no atexit handlers, no
/// flush of the parent's buffers it inherited), every thread with it.
pub fn exit_now(code: i32) -> ! {
    // SAFETY: _exit never returns and touches no Rust state.
    unsafe { libc::_exit(code) }
}

/// SIGKILL to `pid`.
pub fn kill(pid: i32) {
    // SAFETY: integer arguments; a pid already gone is ESRCH, ignored.
    unsafe { libc::kill(pid, libc::SIGKILL) };
}

/// A `waitpid` status as a shell reads it: the exit code, or 128 plus
/// the signal that ended it.
fn exit_code(status: libc::c_int) -> i32 {
    if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        128 + libc::WTERMSIG(status)
    }
}

/// Waits for child `pid`; its exit code (a signal's number + 128).
pub fn wait(pid: i32) -> io::Result<i32> {
    let mut status = 0;
    // SAFETY: `status` is a valid int to write.
    while unsafe { libc::waitpid(pid, &mut status, 0) } < 0 {
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    Ok(exit_code(status))
}

/// Set when SIGINT or SIGTERM arrives while a real run is on.
pub static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Catches SIGINT and SIGTERM into [`INTERRUPTED`] (so a run can end its
/// processes and restore tracefs before it exits); the previous actions,
/// to restore.
pub fn catch_interrupts() -> [libc::sigaction; 2] {
    let mut old: [libc::sigaction; 2] = [
        // SAFETY: sigaction is plain data; zeroed is a valid value.
        unsafe { std::mem::zeroed() },
        // SAFETY: as above.
        unsafe { std::mem::zeroed() },
    ];
    for (i, sig) in [libc::SIGINT, libc::SIGTERM].into_iter().enumerate() {
        // SAFETY: as above.
        let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
        sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
        // SAFETY: `sa` is a valid action whose handler only stores to an
        // atomic (async-signal-safe); `old[i]` receives the previous one.
        unsafe { libc::sigaction(sig, &sa, &mut old[i]) };
    }
    old
}

/// Puts back the actions [`catch_interrupts`] replaced.
pub fn restore_interrupts(old: &[libc::sigaction; 2]) {
    for (i, sig) in [libc::SIGINT, libc::SIGTERM].into_iter().enumerate() {
        // SAFETY: `old[i]` is the action sigaction returned for `sig`.
        unsafe { libc::sigaction(sig, &old[i], std::ptr::null_mut()) };
    }
}

/// The effective user is root.
pub fn is_root() -> bool {
    // SAFETY: no arguments; cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// `mount -t tracefs nodev dir`.
pub fn mount_tracefs(dir: &std::path::Path) -> io::Result<()> {
    let c = |s: &str| std::ffi::CString::new(s).expect("no NUL");
    let d = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).map_err(io::Error::other)?;
    let (src, ty) = (c("nodev"), c("tracefs"));
    // SAFETY: every pointer is a NUL-terminated string that outlives the
    // call; no data argument.
    let r = unsafe { libc::mount(src.as_ptr(), d.as_ptr(), ty.as_ptr(), 0, std::ptr::null()) };
    check(r as libc::c_long).map(drop)
}

/// `umount dir`.
pub fn umount(dir: &std::path::Path) -> io::Result<()> {
    let d = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).map_err(io::Error::other)?;
    // SAFETY: `d` is a NUL-terminated path that outlives the call.
    let r = unsafe { libc::umount(d.as_ptr()) };
    check(r as libc::c_long).map(drop)
}

/// The processes `pid` forked that are still there (from `/proc`): what a
/// run must never leave behind.
pub fn children(pid: u32) -> Vec<i32> {
    parents()
        .into_iter()
        .filter(|&(_, pp)| pp == pid as i32)
        .map(|(p, _)| p)
        .collect()
}

/// Every process below `roots` (their children, theirs, and so on), from
/// one look at `/proc`, the deepest last.
pub fn descendants(roots: &[i32]) -> Vec<i32> {
    let all = parents();
    let mut out: Vec<i32> = Vec::new();
    let mut i = 0;
    let mut look: Vec<i32> = roots.to_vec();
    while i < look.len() {
        let p = look[i];
        i += 1;
        for &(c, _) in all.iter().filter(|&&(_, pp)| pp == p) {
            out.push(c);
            look.push(c);
        }
    }
    out
}

/// Every process now, with its parent: (pid, ppid).
fn parents() -> Vec<(i32, i32)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| {
        let e = e.ok()?;
        let pid: i32 = e.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
        let rest = &stat[stat.rfind(')')? + 2..];
        Some((pid, rest.split_whitespace().nth(1)?.parse().ok()?))
    })
    .collect()
}

/// Starts `cmd` (its program, then its arguments, looked up in `PATH`)
/// in a process group of its own, held before `exec` until [`open_gate`]
/// is called with the returned descriptor: the caller can set up what
/// must watch it (the kernel's record, following it from its first
/// instruction) first. Its pid, and the gate. (Not `std::process::Command`:
/// its `spawn` waits for the `exec`, which the gate holds back.)
pub fn spawn_gated(cmd: &[String]) -> io::Result<(i32, i32)> {
    use std::ffi::CString;
    if cmd.is_empty() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "no command"));
    }
    let args: Vec<CString> = cmd
        .iter()
        .map(|a| CString::new(a.as_bytes()))
        .collect::<Result<_, _>>()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let mut argv: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());
    let (r, w) = pipe(4096)?;
    // SAFETY: between fork and exec the child calls only async-signal-safe
    // functions (setpgid, prctl, read, execvp, _exit) on memory prepared before
    // the fork (`argv` and the strings it points to), and never returns
    // into the caller.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        let e = io::Error::last_os_error();
        close(r);
        close(w);
        return Err(e);
    }
    if pid == 0 {
        // SAFETY: as above.
        unsafe {
            libc::setpgid(0, 0);
            // The command dies with the recorder, even one killed outright
            // (exec keeps this for a program that is not set-uid).
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
            let mut b = [0u8; 1];
            loop {
                let n = libc::read(r, b.as_mut_ptr().cast(), 1);
                if n == 1 {
                    break;
                }
                if n == 0 || (n < 0 && *libc::__errno_location() != libc::EINTR) {
                    // The recorder went away before opening the gate.
                    libc::_exit(127);
                }
            }
            // The gate's ends are O_CLOEXEC: exec closes them.
            libc::execvp(argv[0], argv.as_ptr());
            libc::_exit(127);
        }
    }
    // Also here, so the group exists before the caller kills it.
    // SAFETY: integer arguments; EACCES once the child has exec'd is fine.
    unsafe { libc::setpgid(pid, pid) };
    close(r);
    Ok((pid, w))
}

/// Whether child `pid` has ended: its exit code (a signal's number + 128).
pub fn try_wait(pid: i32) -> io::Result<Option<i32>> {
    let mut status = 0;
    // SAFETY: `status` is a valid int to write.
    let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
    match r {
        0 => Ok(None),
        r if r < 0 => {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                Ok(None)
            } else {
                Err(e)
            }
        }
        _ => Ok(Some(exit_code(status))),
    }
}

/// Lets a [`spawn_gated`] command go on to `exec`.
pub fn open_gate(w: i32) -> io::Result<()> {
    let r = write_all(w, &[1]);
    close(w);
    r
}

/// SIGKILL to every process of group `pgid`.
pub fn kill_group(pgid: i32) {
    // SAFETY: integer arguments; a group already gone is ESRCH, ignored.
    unsafe { libc::kill(-pgid, libc::SIGKILL) };
}
