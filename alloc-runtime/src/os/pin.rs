//! Keeping this image loaded while a pthread key or a thread of ours refers to it.

use super::*;

/// [`pin_image`] not tried yet.
const PIN_UNTRIED: u8 = 0;
/// [`pin_image`] in progress (on some thread).
const PIN_BUSY: u8 = 1;
/// This image stays loaded until the process ends (or needs nothing to stay so).
const PIN_DONE: u8 = 2;
/// This image could not be kept loaded.
const PIN_FAILED: u8 = 3;
static PIN: core::sync::atomic::AtomicU8 = core::sync::atomic::AtomicU8::new(PIN_UNTRIED);

/// The start of glibc's `struct link_map` (`<link.h>`), as `dladdr1` returns it.
#[repr(C)]
struct LinkMap {
    l_addr: usize,
    l_name: *const libc::c_char,
}

/// `dladdr1`'s request for the object's `struct link_map` (glibc's `RTLD_DL_LINKMAP`).
const RTLD_DL_LINKMAP: libc::c_int = 2;
/// glibc's `RTLD_NODELETE` (`<bits/dlfcn.h>`, the same on every Linux architecture), which the
/// `libc` crate does not define for Linux.
const RTLD_NODELETE: libc::c_int = 0x1000;

/// Keeps the image (executable or shared library) that holds this code loaded until the
/// process ends, as `RTLD_NODELETE` does: a `dlclose` of a library that holds the runtime must
/// not unmap the code of a pthread-key destructor that exiting threads will still call, nor
/// that of the background purge's thread. Asks which object holds this function (`dladdr1`);
/// the main executable and a static program need nothing; a shared library is opened again
/// with `RTLD_NOLOAD | RTLD_NODELETE` (which loads nothing, and leaves the object in place
/// whatever `dlclose` the program calls later). Called outside every allocator lock (`dlopen`
/// may allocate, and takes the loader's lock).
///
/// `Ok(true)` once the image is kept (or needs nothing); `Ok(false)` while another call is in
/// progress (on another thread, or on this one: an allocation `dlopen` made), which the caller
/// treats as "not yet"; `Err(())` when the C library refused: the image could be unloaded
/// under a thread that uses it, so the caller must not hand such a thread our code.
pub(crate) fn pin_image() -> Result<bool, ()> {
    match PIN.compare_exchange(PIN_UNTRIED, PIN_BUSY, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => {}
        Err(PIN_DONE) => return Ok(true),
        Err(PIN_FAILED) => return Err(()),
        Err(_) => return Ok(false),
    }
    let done = pin_now();
    PIN.store(if done { PIN_DONE } else { PIN_FAILED }, Ordering::Release);
    if done {
        Ok(true)
    } else {
        Err(())
    }
}

/// [`pin_image`]'s work: whether the image is kept.
fn pin_now() -> bool {
    let mut info: libc::Dl_info = libc::Dl_info {
        dli_fname: core::ptr::null(),
        dli_fbase: core::ptr::null_mut(),
        dli_sname: core::ptr::null(),
        dli_saddr: core::ptr::null_mut(),
    };
    let mut map: *mut libc::c_void = core::ptr::null_mut();
    let this: fn() -> bool = pin_now;
    // SAFETY: `info` and `map` are valid out-pointers; the address is one of our functions.
    let found = unsafe {
        libc::dladdr1(
            this as *const libc::c_void,
            &mut info,
            &mut map,
            RTLD_DL_LINKMAP,
        )
    };
    if found == 0 || map.is_null() {
        // No loaded object holds this code: a static program, which is never unloaded.
        return true;
    }
    // SAFETY: `dladdr1` with `RTLD_DL_LINKMAP` stores the object's `struct link_map`, which
    // lives while the object is loaded (it is: this code runs); its name is a C string.
    let name = unsafe { (*(map as *const LinkMap)).l_name };
    // SAFETY: as above.
    if name.is_null() || unsafe { *name } == 0 {
        // The main executable (its link map has an empty name): never unloaded.
        return true;
    }
    // SAFETY: `name` is the loaded object's own path; RTLD_NOLOAD only looks it up.
    let h = unsafe { libc::dlopen(name, libc::RTLD_LAZY | libc::RTLD_NOLOAD | RTLD_NODELETE) };
    // The handle is kept: the object stays open (and, with RTLD_NODELETE, loaded) for good.
    !h.is_null()
}

/// `fork` child handler: a [`pin_image`] that a thread which did not survive the fork had in
/// progress is tried again when next needed.
pub(crate) fn pin_fork_child() {
    let _ = PIN.compare_exchange(PIN_BUSY, PIN_UNTRIED, Ordering::AcqRel, Ordering::Acquire);
}
