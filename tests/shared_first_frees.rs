//! A thread's frees of its first blocks, while many threads allocate (blocks of the shared
//! heap's spans), are pushed at once: they write none of its heap's outboxes. Alone in its test
//! binary, so that the thread's heap is a new one: a heap from the pool, which an exited thread
//! of another test held, may have its outboxes' pages written already.

use specalloc_runtime::test_hooks::{thread_heap, DIRECT_FREES, SHARED_FIRST};

mod common;
use common::{written_pages, Idle};

#[global_allocator]
static GLOBAL: specalloc::SpecAlloc = specalloc::SpecAlloc;

#[test]
fn freeing_its_first_blocks_writes_no_outbox() {
    let idle = Idle::start();
    // Sizes of as many classes (none of them the other test's).
    let sizes = [24, 56, 120, 248, 504, 1016, 2040, 4088];
    let first = SHARED_FIRST as usize;
    assert!(
        sizes.len() * first > DIRECT_FREES as usize,
        "the frees must outnumber a heap's direct frees to tell"
    );
    let (heap, size, pages) = std::thread::spawn(move || {
        let mut blocks: Vec<Vec<u8>> = Vec::with_capacity(64);
        for &n in &sizes {
            for _ in 0..first {
                blocks.push(vec![5u8; n]);
            }
        }
        assert!(blocks.iter().all(|b| b[b.len() - 1] == 5));
        drop(blocks);
        let (heap, size) = thread_heap();
        (heap, size, written_pages(heap, size))
    })
    .join()
    .expect("measuring thread");
    assert!(pages[0], "the thread did not write its heap's first page");
    let written: Vec<usize> = (1..pages.len()).filter(|&i| pages[i]).collect();
    assert!(
        written.is_empty(),
        "freeing {} first blocks, the thread wrote pages {written:?} of its heap at {heap:#x} \
         ({size} bytes), beyond the first",
        sizes.len() * first
    );
    idle.finish();
}
