/* The default of specalloc's link-time install mark (see src/mark.rs): 0, a weak definition
 * that the strong one `install!` emits (value 1) replaces when the program is linked.
 *
 * Hidden, so that each linked image (an executable, or a shared library with its own copy of
 * the runtime) decides for its own code: a library that does not install specalloc never sees
 * the mark of the executable that loads it, whose global allocator is not the library's. */
__attribute__((weak, visibility("hidden"))) const unsigned char specalloc_install_mark = 0;
