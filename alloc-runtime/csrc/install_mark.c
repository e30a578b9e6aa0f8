/* The default of specalloc's link-time install mark (see src/mark.rs): 0, a weak definition
 * that the strong one `install!` emits (value 1) replaces when the program is linked.
 *
 * Hidden, so that each linked image (an executable, or a shared library with its own copy of
 * the runtime) decides for its own code: a library that does not install specalloc never sees
 * the mark of the executable that loads it, whose global allocator is not the library's.
 *
 * This object is linked into every image that links the runtime, whether or not the image
 * defines the strong mark: the runtime references `specalloc_install_mark_default` from a
 * `#[used]` static (src/mark.rs), which pulls this object out of the archive. That matters
 * twice. An image that does not install reads this 0, even when a shared library linked before
 * the runtime (a Rust cdylib that installs) defines the mark too: a definition in the image's
 * own objects, weak or not, wins over one in a shared library. And an image that installs gets
 * the strong 1 with the hidden visibility of this default (the linker gives a symbol the most
 * constraining visibility among its definitions), so the mark is never exported from the
 * image, and never interposed by another image's. */
__attribute__((weak, visibility("hidden"))) const unsigned char specalloc_install_mark = 0;

/* What the runtime references so that this object is always linked (see above). */
__attribute__((visibility("hidden"))) const unsigned char specalloc_install_mark_default = 0;
