//! Development probe: tiny objects allocated on producer threads and freed on a consumer
//! thread (remote tiny frees), then checks that every tiny block came back.
#[global_allocator]
static G: specalloc_runtime::SpecAlloc = specalloc_runtime::SpecAlloc;
fn main() {
    let s0 = specalloc_runtime::stats();
    let (tx, rx) = std::sync::mpsc::channel::<Vec<Box<[u8; 5]>>>();
    let cons = std::thread::spawn(move || {
        let mut n = 0;
        for v in rx {
            for b in v {
                assert_eq!(b[0], b[4]);
                n += 1;
            }
        }
        n
    });
    let prods: Vec<_> = (0..3)
        .map(|t| {
            let tx = tx.clone();
            std::thread::spawn(move || {
                let mut keep = Vec::new();
                for r in 0..200u32 {
                    let v: Vec<Box<[u8; 5]>> = (0..1000)
                        .map(|i| Box::new([(i + r + t) as u8; 5]))
                        .collect();
                    // interleave: keep odd ones locally for a while, send even ones
                    let (a, b): (Vec<_>, Vec<_>) =
                        v.into_iter().enumerate().partition(|(i, _)| i % 2 == 0);
                    tx.send(a.into_iter().map(|x| x.1).collect()).unwrap();
                    keep.push(b);
                    if keep.len() > 3 {
                        keep.remove(0);
                    }
                }
            })
        })
        .collect();
    drop(tx);
    for p in prods {
        p.join().unwrap();
    }
    let n = cons.join().unwrap();
    let s1 = specalloc_runtime::stats();
    println!("consumed {n}; tiny objects {} -> {}, tiny blocks {} -> {}, tiny spans {} -> {}, central {}",
        s0.tiny_objects, s1.tiny_objects, s0.tiny_blocks, s1.tiny_blocks, s0.tiny_spans, s1.tiny_spans, s1.central_spans);
}
