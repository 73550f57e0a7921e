//! The HPACK decoder never panics, never copies more than the list limit,
//! and whatever it decodes, ebb's encoder encodes and the decoder reads
//! back to the same list.
#![no_main]

use ebb::h2::hpack::{Decoder, Encoder, HeaderList, HuffmanMode};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The first byte picks the list limit, so the bomb path is covered.
    let Some((&sel, block)) = data.split_first() else {
        return;
    };
    let max_list = 64 + usize::from(sel) * 64;
    let mut d = Decoder::new(4096);
    let mut l = HeaderList::default();
    // Two passes over the same bytes exercise the dynamic table's state.
    for _ in 0..2 {
        if d.decode(block, max_list, &mut l).is_err() {
            return;
        }
        assert!(d.table().size() <= d.table().max_size());
        if !l.too_large {
            assert!(l.list_size <= max_list);
        }
        let fields: Vec<(Vec<u8>, Vec<u8>)> =
            l.iter().map(|(n, v)| (n.to_vec(), v.to_vec())).collect();
        let mut e = Encoder::new(4096, HuffmanMode::Shorter);
        let mut enc = Vec::new();
        e.begin_block(&mut enc);
        for (n, v) in &fields {
            e.encode(n, v, &mut enc);
        }
        let mut d2 = Decoder::new(4096);
        let mut l2 = HeaderList::default();
        d2.decode(&enc, usize::MAX, &mut l2).expect("own encoding decodes");
        let back: Vec<(Vec<u8>, Vec<u8>)> =
            l2.iter().map(|(n, v)| (n.to_vec(), v.to_vec())).collect();
        assert_eq!(back, fields);
    }
});
