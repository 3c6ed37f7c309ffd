// SPDX-License-Identifier: MIT OR Apache-2.0
//! Page memory for rings, allocated page-aligned and zeroed, as the kernel
//! hands pages to a perf buffer.

use std::alloc::{Layout, alloc_zeroed, dealloc};

use perfaux::abi::{PAGE_SIZE, PerfEventMmapPage};
use perfaux::aux::{AuxArea, AuxConfig};
use perfaux::ring::{BackwardReader, Consumer, NestHook, NoHook, Ring, RingConfig};

/// One page-aligned, zeroed allocation.
pub struct PageBlock {
    ptr: *mut u8,
    layout: Layout,
}

impl PageBlock {
    /// `len` bytes (a multiple of PAGE_SIZE), page-aligned and zeroed.
    pub fn new(len: usize) -> PageBlock {
        PageBlock::aligned(len, PAGE_SIZE)
    }

    /// `len` bytes aligned to `align` (a power of two), zeroed: a block as
    /// the kernel's page allocator hands out (aligned to its size).
    pub fn aligned(len: usize, align: usize) -> PageBlock {
        let layout = Layout::from_size_align(len, align).expect("a valid page layout");
        // SAFETY: the layout has a non-zero size (callers pass whole pages).
        let ptr = unsafe { alloc_zeroed(layout) };
        assert!(!ptr.is_null(), "out of memory");
        PageBlock { ptr, layout }
    }

    /// The block's first byte.
    pub fn ptr(&self) -> *mut u8 {
        self.ptr
    }
}

impl Drop for PageBlock {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { dealloc(self.ptr, self.layout) };
    }
}

/// The memory of one ring: a user page and `chunks` chunks of
/// `PAGE_SIZE << order` bytes.
pub struct RingMemory {
    user: PageBlock,
    _chunks: Vec<PageBlock>,
    chunk_ptrs: Vec<*mut u8>,
    order: u32,
}

impl RingMemory {
    /// A user page and `chunks` data chunks of `PAGE_SIZE << order` bytes.
    pub fn new(chunks: usize, order: u32) -> RingMemory {
        let user = PageBlock::new(PAGE_SIZE);
        let blocks: Vec<PageBlock> = (0..chunks)
            .map(|_| PageBlock::new(PAGE_SIZE << order))
            .collect();
        let chunk_ptrs = blocks.iter().map(PageBlock::ptr).collect();
        RingMemory {
            user,
            _chunks: blocks,
            chunk_ptrs,
            order,
        }
    }

    /// The user page.
    pub fn user_page(&self) -> *mut PerfEventMmapPage {
        self.user.ptr().cast()
    }

    /// The chunk table.
    pub fn chunks(&self) -> &[*mut u8] {
        &self.chunk_ptrs
    }

    /// The chunk order.
    pub fn order(&self) -> u32 {
        self.order
    }

    /// Data size in bytes.
    pub fn data_size(&self) -> usize {
        self.chunk_ptrs.len() * (PAGE_SIZE << self.order)
    }

    /// A ring over this memory.
    pub fn ring<'a>(&'a self, config: RingConfig<'a>) -> Ring<'a, NoHook> {
        self.ring_with_hook(config, NoHook)
    }

    /// A ring over this memory with a nesting hook.
    pub fn ring_with_hook<'a, H: NestHook>(
        &'a self,
        config: RingConfig<'a>,
        hook: H,
    ) -> Ring<'a, H> {
        // SAFETY: the memory lives as long as `self`, which outlives the
        // ring ('a); it is used only by this ring and its consumers.
        unsafe { Ring::with_hook(self.user_page(), self.chunks(), self.order, config, hook) }
            .expect("valid ring memory")
    }

    /// A consumer of the (writable) ring over this memory.
    pub fn consumer(&self) -> Consumer<'_> {
        // SAFETY: as for `ring`; tests use it only with writable rings.
        unsafe { Consumer::new(self.user_page(), self.chunks(), self.order) }
            .expect("valid ring memory")
    }

    /// A reader of the (paused, backward) ring over this memory.
    pub fn backward_reader(&self) -> BackwardReader<'_> {
        // SAFETY: as for `ring`; tests call it only when no writer is active.
        unsafe { BackwardReader::new(self.user_page(), self.chunks(), self.order) }
            .expect("valid ring memory")
    }

    /// The raw data bytes of chunk `i`.
    pub fn chunk_bytes(&self, i: usize) -> &[u8] {
        // SAFETY: the chunk is `PAGE_SIZE << order` bytes; callers read it
        // when no writer is active.
        unsafe { std::slice::from_raw_parts(self.chunk_ptrs[i], PAGE_SIZE << self.order) }
    }

    /// An AUX area over `aux`, attached to this ring memory's user page.
    pub fn aux_area<'a>(&'a self, aux: &'a AuxMemory, config: AuxConfig<'a>) -> AuxArea<'a> {
        // SAFETY: both memories live as long as `self`/`aux` ('a) and are used
        // only by the ring, its consumers and this area.
        unsafe { AuxArea::new(self.user_page(), aux.pages(), config) }.expect("valid AUX memory")
    }

    /// Reads every published record and gives the space back.
    pub fn records(&self) -> Vec<Vec<u8>> {
        let mut c = self.consumer();
        c.refresh();
        let mut scratch = vec![0u8; 65536];
        let mut out = Vec::new();
        while let Some(r) = c.next_record(&mut scratch) {
            out.push(r.expect("a well-formed ring").to_vec());
        }
        c.commit();
        out
    }

    /// `data_head` as the user page shows it now.
    pub fn data_head(&self) -> u64 {
        // SAFETY: the user page is valid and 8-aligned; read atomically.
        unsafe {
            std::sync::atomic::AtomicU64::from_ptr(std::ptr::addr_of_mut!(
                (*self.user_page()).data_head
            ))
        }
        .load(std::sync::atomic::Ordering::Acquire)
    }
}

/// The pages of an AUX area: `pages` 4 KiB pages, allocated as blocks of
/// `PAGE_SIZE << order` (so a high-order block is its pages in a row, as
/// Linux hands them to `setup_aux`).
pub struct AuxMemory {
    _blocks: Vec<PageBlock>,
    page_ptrs: Vec<*mut u8>,
}

impl AuxMemory {
    /// `pages` pages in blocks of `1 << order` pages.
    pub fn new(pages: usize, order: u32) -> AuxMemory {
        let per_block = 1usize << order;
        assert!(pages % per_block == 0);
        let blocks: Vec<PageBlock> = (0..pages / per_block)
            .map(|_| PageBlock::aligned(PAGE_SIZE << order, PAGE_SIZE << order))
            .collect();
        let page_ptrs = blocks
            .iter()
            .flat_map(|b| (0..per_block).map(move |i| b.ptr().wrapping_add(i * PAGE_SIZE)))
            .collect();
        AuxMemory {
            _blocks: blocks,
            page_ptrs,
        }
    }

    /// Pages whose blocks have the given orders (in this order): the
    /// mixed-order buffers Linux's allocator can produce.
    pub fn mixed(orders: &[u32]) -> AuxMemory {
        let blocks: Vec<PageBlock> = orders
            .iter()
            .map(|&o| PageBlock::aligned(PAGE_SIZE << o, PAGE_SIZE << o))
            .collect();
        let page_ptrs = blocks
            .iter()
            .zip(orders)
            .flat_map(|(b, &o)| (0..1usize << o).map(move |i| b.ptr().wrapping_add(i * PAGE_SIZE)))
            .collect();
        AuxMemory {
            _blocks: blocks,
            page_ptrs,
        }
    }

    /// `pages` pages that are never physically adjacent: every other page
    /// of one block.
    pub fn scattered(pages: usize) -> AuxMemory {
        let block = PageBlock::new(2 * pages * PAGE_SIZE);
        let page_ptrs = (0..pages)
            .map(|i| block.ptr().wrapping_add(2 * i * PAGE_SIZE))
            .collect();
        AuxMemory {
            _blocks: vec![block],
            page_ptrs,
        }
    }

    /// The page table (one pointer per 4 KiB page).
    pub fn pages(&self) -> &[*mut u8] {
        &self.page_ptrs
    }

    /// Size in bytes.
    pub fn size(&self) -> usize {
        self.page_ptrs.len() * PAGE_SIZE
    }

    /// Writes `bytes` at AUX offset `at` (wrapping), as a tracer would.
    pub fn write(&self, at: usize, bytes: &[u8]) {
        for (i, &b) in bytes.iter().enumerate() {
            let pos = (at + i) % self.size();
            // SAFETY: the page is 4 KiB and `pos % PAGE_SIZE` is inside it;
            // tests write only when no reader is active.
            unsafe { *self.page_ptrs[pos / PAGE_SIZE].add(pos % PAGE_SIZE) = b };
        }
    }

    /// The byte at AUX offset `at` (wrapping).
    pub fn byte(&self, at: usize) -> u8 {
        let pos = at % self.size();
        // SAFETY: as in `write`.
        unsafe { *self.page_ptrs[pos / PAGE_SIZE].add(pos % PAGE_SIZE) }
    }
}

/// An output sink that appends to a vector and remembers each call's size.
#[derive(Default)]
pub struct VecSink {
    /// Every byte received.
    pub bytes: Vec<u8>,
    /// The size of every `copy` call.
    pub calls: Vec<usize>,
}

impl perfaux::ring::OutputSink for VecSink {
    fn copy(&mut self, bytes: &[u8]) -> usize {
        self.bytes.extend_from_slice(bytes);
        self.calls.push(bytes.len());
        0
    }
}
