//! The boundary with gfal2, and the crate's only `unsafe` code. gfal2 loads
//! `libgfal_plugin_longhaul.so` and calls [`gfal_plugin_init`]; the C shim (`shim.c`) fills
//! gfal2's interface struct and turns each gfal2 callback into a call of one
//! `longhaul_gfal_*` function here, with plain C types: URLs as C strings, an entry's
//! metadata as [`LhStat`], a copy's parameters as [`LhCopyParams`], and gfal2's `GError**`
//! and context as opaque pointers handed back to the shim's `lh_shim_*` helpers (set an
//! error, read an option, report progress).
//!
//! Each function here reads its arguments, calls the safe code (`namespace`, `copy`) and
//! writes the outcome back; a panic is caught and reported as EIO (it must not unwind into
//! C). The declarations must match `shim.c`'s, which says so beside them.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::copy::{self, ChecksumCheck, CopyParams, EventSide, Hooks, LogLevel, Sample, Stage};
use crate::error::PluginError;
use crate::namespace::{self, EntryStat, Listing};
use crate::settings::Settings;
use crate::url;

include!(concat!(env!("OUT_DIR"), "/iface_size.rs"));

/// gfal2's `gfal_plugin_interface`, as a blob of its exact size and alignment (measured by
/// build.rs; `shim.c` asserts both) for [`gfal_plugin_init`] to return by value. Only the C
/// shim writes its fields.
#[repr(C)]
pub struct PluginInterface {
    words: [usize; IFACE_SIZE / std::mem::size_of::<usize>()],
}

/// `struct lh_stat` of `shim.c`.
#[repr(C)]
pub struct LhStat {
    mode: u32,
    size: u64,
    mtime_secs: i64,
    mtime_nanos: u32,
}

/// `struct lh_copy_params` of `shim.c`: gfal2's transfer parameters, read by the shim.
#[repr(C)]
pub struct LhCopyParams {
    replace_existing: c_int,
    create_parent: c_int,
    strict: c_int,
    checksum_mode: c_int,
    checksum_type: [c_char; 64],
    checksum_value: [c_char; 256],
    nbstreams: u32,
    timeout_secs: u64,
}

extern "C" {
    fn lh_shim_plugin_fill(ifce: *mut PluginInterface, ctx: *mut c_void, err: *mut c_void);
    fn lh_shim_set_error(err: *mut c_void, code: c_int, msg: *const c_char);
    fn lh_shim_set_copy_error(
        err: *mut c_void,
        code: c_int,
        side: c_int,
        note: c_int,
        msg: *const c_char,
    );
    fn lh_shim_get_opt(ctx: *mut c_void, key: *const c_char, buf: *mut c_char, cap: usize)
        -> c_int;
    fn lh_shim_checksum(
        ctx: *mut c_void,
        url: *const c_char,
        algorithm: *const c_char,
        out: *mut c_char,
        out_cap: usize,
        msg: *mut c_char,
        msg_cap: usize,
    ) -> c_int;
    fn lh_shim_monitor(
        params: *mut c_void,
        src: *const c_char,
        dst: *const c_char,
        bytes: u64,
        average_bps: u64,
        instant_bps: u64,
        elapsed_secs: i64,
    );
    fn lh_shim_event(params: *mut c_void, side: c_int, stage: c_int, description: *const c_char);
    fn lh_shim_log(level: c_int, msg: *const c_char);
}

/// gfal2's entry point: the plugin's interface, by value.
///
/// # Safety
/// `ctx` is the gfal2 context loading the plugin and `err` a `GError**` (gfal2's loader).
#[no_mangle]
pub unsafe extern "C" fn gfal_plugin_init(ctx: *mut c_void, err: *mut c_void) -> PluginInterface {
    let mut ifce = PluginInterface {
        words: [0; IFACE_SIZE / std::mem::size_of::<usize>()],
    };
    // SAFETY: `ifce` is a writable blob of sizeof(gfal_plugin_interface) bytes with its
    // alignment (asserted in shim.c against the same measured size); the shim writes only
    // within it and keeps neither pointer.
    unsafe { lh_shim_plugin_fill(&mut ifce, ctx, err) };
    ifce
}

/// Whether the plugin serves `url` (gfal2's `check_plugin_url`, for the operations the
/// shim lists).
///
/// # Safety
/// `url` is a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn longhaul_gfal_claims_url(url: *const c_char) -> c_int {
    // SAFETY: the caller passes a NUL-terminated string (or NULL, which claims nothing).
    let url = unsafe { bytes(url) };
    guarded(0, || c_int::from(url.is_some_and(url::claims)))
}

/// Whether the plugin copies `src` to `dst` (`check_plugin_url_transfer`).
///
/// # Safety
/// Both are NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn longhaul_gfal_claims_copy(
    src: *const c_char,
    dst: *const c_char,
) -> c_int {
    // SAFETY: the caller passes NUL-terminated strings (or NULL, which claims nothing).
    let (src, dst) = unsafe { (bytes(src), bytes(dst)) };
    guarded(0, || match (src, dst) {
        (Some(s), Some(d)) => c_int::from(copy::claims(s, d)),
        _ => 0,
    })
}

/// `statG`/`lstatG`: 0 with `out` filled, or -1 with `err` set.
///
/// # Safety
/// `ctx` is gfal2's context, `url` a NUL-terminated string, `out` writable, `err` a
/// `GError**`.
#[no_mangle]
pub unsafe extern "C" fn longhaul_gfal_stat(
    ctx: *mut c_void,
    url: *const c_char,
    out: *mut LhStat,
    err: *mut c_void,
) -> c_int {
    // SAFETY: as the function's contract says.
    let url = unsafe { bytes(url) };
    let got = answer(err, || {
        namespace::stat(&settings(ctx)?, url.unwrap_or_default())
    });
    match got {
        Some(s) => {
            // SAFETY: `out` points to a `struct lh_stat` on the shim's stack.
            unsafe { out.write(lh_stat(&s)) };
            0
        }
        None => -1,
    }
}

/// `opendirG`: the whole listing, fetched now (freed by [`longhaul_gfal_closedir`]), or
/// NULL with `err` set.
///
/// # Safety
/// As [`longhaul_gfal_stat`].
#[no_mangle]
pub unsafe extern "C" fn longhaul_gfal_opendir(
    ctx: *mut c_void,
    url: *const c_char,
    err: *mut c_void,
) -> *mut c_void {
    // SAFETY: as the function's contract says.
    let url = unsafe { bytes(url) };
    match answer(err, || {
        namespace::list(&settings(ctx)?, url.unwrap_or_default())
    }) {
        Some(listing) => Box::into_raw(Box::new(listing)).cast(),
        None => std::ptr::null_mut(),
    }
}

/// `readdirG`: 1 with the next entry's name (NUL-terminated, within `cap`) and metadata
/// written, 0 at the end.
///
/// # Safety
/// `listing` comes from [`longhaul_gfal_opendir`] and is not closed; `name` holds `cap`
/// bytes; `st` is writable.
#[no_mangle]
pub unsafe extern "C" fn longhaul_gfal_readdir(
    listing: *mut c_void,
    name: *mut c_char,
    cap: usize,
    st: *mut LhStat,
) -> c_int {
    // SAFETY: the listing is the Box opendir made, used by one caller at a time (gfal2
    // locks a file handle while it is read).
    let listing = unsafe { &mut *listing.cast::<Listing>() };
    let Some((entry, stat)) = guarded(None, || listing.next_entry()) else {
        return 0;
    };
    if cap == 0 {
        return 0;
    }
    let n = entry.len().min(cap - 1);
    // SAFETY: `name` holds `cap` bytes and `n + 1 <= cap`; `st` is writable.
    unsafe {
        std::ptr::copy_nonoverlapping(entry.as_ptr().cast::<c_char>(), name, n);
        name.add(n).write(0);
        st.write(lh_stat(&stat));
    }
    1
}

/// `closedirG`: frees the listing.
///
/// # Safety
/// `listing` comes from [`longhaul_gfal_opendir`] and is not used again.
#[no_mangle]
pub unsafe extern "C" fn longhaul_gfal_closedir(listing: *mut c_void) {
    if !listing.is_null() {
        // SAFETY: the Box opendir leaked, given back once.
        drop(unsafe { Box::from_raw(listing.cast::<Listing>()) });
    }
}

/// `mkdirpG`: 0, or -1 with `err` set.
///
/// # Safety
/// As [`longhaul_gfal_stat`].
#[no_mangle]
pub unsafe extern "C" fn longhaul_gfal_mkdir(
    ctx: *mut c_void,
    url: *const c_char,
    mode: u32,
    parents: c_int,
    err: *mut c_void,
) -> c_int {
    // SAFETY: as the function's contract says.
    let url = unsafe { bytes(url) };
    status(answer(err, || {
        namespace::mkdir(&settings(ctx)?, url.unwrap_or_default(), mode, parents != 0)
    }))
}

/// `unlinkG`: 0, or -1 with `err` set.
///
/// # Safety
/// As [`longhaul_gfal_stat`].
#[no_mangle]
pub unsafe extern "C" fn longhaul_gfal_unlink(
    ctx: *mut c_void,
    url: *const c_char,
    err: *mut c_void,
) -> c_int {
    // SAFETY: as the function's contract says.
    let url = unsafe { bytes(url) };
    status(answer(err, || {
        namespace::unlink(&settings(ctx)?, url.unwrap_or_default())
    }))
}

/// `rmdirG`: 0, or -1 with `err` set.
///
/// # Safety
/// As [`longhaul_gfal_stat`].
#[no_mangle]
pub unsafe extern "C" fn longhaul_gfal_rmdir(
    ctx: *mut c_void,
    url: *const c_char,
    err: *mut c_void,
) -> c_int {
    // SAFETY: as the function's contract says.
    let url = unsafe { bytes(url) };
    status(answer(err, || {
        namespace::rmdir(&settings(ctx)?, url.unwrap_or_default())
    }))
}

/// `checksum_calcG`: 0 with the value in `out` (NUL-terminated), or -1 with `err` set.
///
/// # Safety
/// As [`longhaul_gfal_stat`]; `algorithm` is a NUL-terminated string and `out` holds `cap`
/// bytes.
#[no_mangle]
pub unsafe extern "C" fn longhaul_gfal_checksum(
    ctx: *mut c_void,
    url: *const c_char,
    algorithm: *const c_char,
    out: *mut c_char,
    cap: usize,
    offset: i64,
    length: u64,
    err: *mut c_void,
) -> c_int {
    // SAFETY: as the function's contract says.
    let (url, algorithm) = unsafe { (bytes(url), bytes(algorithm)) };
    let value = answer(err, || {
        let algorithm = String::from_utf8_lossy(algorithm.unwrap_or_default());
        let value = namespace::checksum(
            &settings(ctx)?,
            url.unwrap_or_default(),
            &algorithm,
            offset,
            length,
        )?;
        if value.len() >= cap {
            return Err(PluginError::new(
                libc::ENOBUFS,
                format!("the checksum {value} does not fit gfal2's buffer of {cap} bytes"),
            ));
        }
        Ok(value)
    });
    match value {
        Some(v) => {
            // SAFETY: `out` holds `cap` bytes and `v.len() + 1 <= cap` (checked above).
            unsafe {
                std::ptr::copy_nonoverlapping(v.as_ptr().cast::<c_char>(), out, v.len());
                out.add(v.len()).write(0);
            }
            0
        }
        None => -1,
    }
}

/// `copy_file`: 0, or -1 with `err` set (gfalt_set_error's side and note when known).
///
/// # Safety
/// `ctx` is gfal2's context, `params` its `gfalt_params_t`, `p` the shim's reading of
/// them, `src` and `dst` NUL-terminated strings, `err` a `GError**`.
#[no_mangle]
pub unsafe extern "C" fn longhaul_gfal_copy(
    ctx: *mut c_void,
    params: *mut c_void,
    p: *const LhCopyParams,
    src: *const c_char,
    dst: *const c_char,
    err: *mut c_void,
) -> c_int {
    // SAFETY: as the function's contract says; the struct is on the shim's stack.
    let (p, src_c, dst_c) = unsafe { (&*p, CStr::from_ptr(src), CStr::from_ptr(dst)) };
    let hooks = GfalHooks {
        ctx,
        params,
        src: src_c.to_owned(),
        dst: dst_c.to_owned(),
    };
    status(answer(err, || {
        let params = CopyParams {
            replace: p.replace_existing != 0,
            create_parent: p.create_parent != 0,
            strict: p.strict != 0,
            checksum: ChecksumCheck::from_gfal(
                p.checksum_mode,
                &text(&p.checksum_type),
                &text(&p.checksum_value),
            ),
            streams: u16::try_from(p.nbstreams).ok().filter(|&n| n > 0),
        };
        if p.timeout_secs > 0 {
            hooks.log(
                LogLevel::Debug,
                &format!(
                    "the copy's timeout of {} s is not enforced: longhaul runs a copy to \
                     its end or its error",
                    p.timeout_secs
                ),
            );
        }
        copy::copy(
            &settings(ctx)?,
            &params,
            src_c.to_bytes(),
            dst_c.to_bytes(),
            &hooks,
        )
    }))
}

/// gfal2's side of a running copy: its context, its parameters (whose callbacks are
/// told), and the two URLs as gfal2 named them.
struct GfalHooks {
    ctx: *mut c_void,
    params: *mut c_void,
    src: CString,
    dst: CString,
}

impl Hooks for GfalHooks {
    fn foreign_checksum(&self, url: &[u8], algorithm: &str) -> Result<String, PluginError> {
        let url = c_string(url);
        let algorithm = c_string(algorithm.as_bytes());
        let mut out = [0 as c_char; 1024];
        let mut msg = [0 as c_char; 2048];
        // SAFETY: the context is gfal2's, the strings NUL-terminated, and each buffer's
        // length is the one passed; the shim NUL-terminates what it writes.
        let code = unsafe {
            lh_shim_checksum(
                self.ctx,
                url.as_ptr(),
                algorithm.as_ptr(),
                out.as_mut_ptr(),
                out.len(),
                msg.as_mut_ptr(),
                msg.len(),
            )
        };
        if code == 0 {
            Ok(text(&out))
        } else {
            Err(PluginError::new(code, text(&msg)).context(format!(
                "{} checksum of {}",
                algorithm.to_string_lossy(),
                url.to_string_lossy()
            )))
        }
    }

    fn monitor(&self, s: &Sample) {
        // SAFETY: `params` is the copy's gfalt_params_t, alive for the whole copy_file
        // call, and the URLs are NUL-terminated.
        unsafe {
            lh_shim_monitor(
                self.params,
                self.src.as_ptr(),
                self.dst.as_ptr(),
                s.bytes,
                s.average_bps,
                s.instant_bps,
                s.elapsed_secs,
            )
        }
    }

    fn event(&self, side: EventSide, stage: Stage, description: &str) {
        let d = c_string(description.as_bytes());
        // SAFETY: as in `monitor`; the shim checks both numbers against its tables.
        unsafe { lh_shim_event(self.params, side as c_int, stage as c_int, d.as_ptr()) }
    }

    fn log(&self, level: LogLevel, message: &str) {
        let m = c_string(message.as_bytes());
        // SAFETY: a NUL-terminated string, printed with "%s".
        unsafe { lh_shim_log(level as c_int, m.as_ptr()) }
    }
}

/// The settings, read from the environment and gfal2's options of `ctx`.
fn settings(ctx: *mut c_void) -> Result<Settings, PluginError> {
    Settings::read(&|key| option(ctx, key), &|var| std::env::var_os(var))
}

/// gfal2's option `LONGHAUL:key`, if set.
fn option(ctx: *mut c_void, key: &str) -> Option<String> {
    let key = c_string(key.as_bytes());
    let mut buf = [0 as c_char; 4096];
    // SAFETY: the context is gfal2's; the key is NUL-terminated; the shim writes at most
    // `buf.len()` bytes, NUL included.
    let n = unsafe { lh_shim_get_opt(ctx, key.as_ptr(), buf.as_mut_ptr(), buf.len()) };
    (n >= 0).then(|| text(&buf))
}

/// Runs `f` (a panic becomes EIO); on an error sets `err` and gives `None`.
fn answer<T>(err: *mut c_void, f: impl FnOnce() -> Result<T, PluginError>) -> Option<T> {
    let outcome = catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|panic| {
        let why = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        Err(PluginError::new(
            libc::EIO,
            format!("the longhaul plugin failed unexpectedly (a bug; please report it): {why}"),
        ))
    });
    match outcome {
        Ok(v) => Some(v),
        Err(e) => {
            set_error(err, &e);
            None
        }
    }
}

/// Runs `f`, giving `default` should it panic.
fn guarded<T>(default: T, f: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(default)
}

fn status(done: Option<()>) -> c_int {
    if done.is_some() {
        0
    } else {
        -1
    }
}

fn set_error(err: *mut c_void, e: &PluginError) {
    let msg = c_string(e.message.as_bytes());
    let code = if e.errno > 0 { e.errno } else { libc::EIO };
    // SAFETY: `err` is the GError** gfal2 passed (the shim's helpers accept NULL); the
    // message is NUL-terminated and printed with "%s".
    unsafe {
        match e.copy {
            Some(c) => {
                lh_shim_set_copy_error(err, code, c.side as c_int, c.note as c_int, msg.as_ptr())
            }
            None => lh_shim_set_error(err, code, msg.as_ptr()),
        }
    }
}

/// The bytes of a C string; `None` for NULL.
///
/// # Safety
/// `p` is NULL or a NUL-terminated string that outlives the result.
unsafe fn bytes<'a>(p: *const c_char) -> Option<&'a [u8]> {
    // SAFETY: as the function's contract says.
    (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_bytes())
}

/// `s` as a C string (a NUL inside, which no caller passes on purpose, is replaced).
fn c_string(s: &[u8]) -> CString {
    let clean: Vec<u8> = s.iter().map(|&b| if b == 0 { b'?' } else { b }).collect();
    CString::new(clean).unwrap_or_default()
}

/// A fixed C buffer's text up to its first NUL (all of it if none).
fn text(buf: &[c_char]) -> String {
    let bytes: Vec<u8> = buf
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

fn lh_stat(s: &EntryStat) -> LhStat {
    LhStat {
        mode: s.mode,
        size: s.size,
        mtime_secs: s.mtime_secs,
        mtime_nanos: s.mtime_nanos,
    }
}
