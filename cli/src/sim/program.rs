// SPDX-License-Identifier: MIT OR Apache-2.0
//! The synthetic program the simulated CPUs run: a binary of functions at
//! fixed addresses, and threads whose control flow (conditional branches,
//! calls and returns, indirect jumps) is drawn from a seeded generator.
//! Each step is what a CPU would report to its PT tracer.

use perfaux::pt::stream::TraceEvent;

use crate::rng::SplitMix64;

/// Where the program's text is mapped (`/usr/bin/perfaux-demo`).
pub const TEXT_START: u64 = 0x40_0000;
/// Its size.
pub const TEXT_SIZE: u64 = 0x4_0000;
/// The path in its MMAP record.
pub const BINARY: &str = "/usr/bin/perfaux-demo";
/// The kernel's interrupt entry (interrupts are traced: `exclude_kernel` 0).
pub const KERNEL_IRQ: u64 = 0xffff_ffff_81a0_0000;
/// How far the handler's code goes.
pub const KERNEL_IRQ_SIZE: u64 = 0x2000;

/// The functions of the binary: (start, length), ascending.
#[derive(Clone, Debug)]
pub struct Binary {
    functions: Vec<(u64, u64)>,
}

impl Binary {
    /// A binary of 64 functions of 1-4 KiB laid out from [`TEXT_START`].
    pub fn generate(rng: &mut SplitMix64) -> Binary {
        let mut functions = Vec::new();
        let mut at = TEXT_START;
        while functions.len() < 64 {
            let len = 0x400 + 16 * rng.below(0xc00 / 16);
            if at + len > TEXT_START + TEXT_SIZE {
                break;
            }
            functions.push((at, len));
            at += len;
        }
        Binary { functions }
    }

    fn function_of(&self, ip: u64) -> usize {
        self.functions
            .partition_point(|&(start, _)| start <= ip)
            .saturating_sub(1)
    }

    fn block(&self, f: usize, rng: &mut SplitMix64) -> u64 {
        let (start, len) = self.functions[f];
        start + 16 * rng.below(len / 16)
    }
}

/// One thread of the program.
#[derive(Clone, Debug)]
pub struct Thread {
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// The instruction pointer.
    pub ip: u64,
    stack: Vec<u64>,
    rng: SplitMix64,
}

/// What one step of a thread did.
#[derive(Clone, Copy, Debug)]
pub struct Step {
    /// Cycles it took.
    pub cycles: u64,
    /// Instructions it retired.
    pub instructions: u64,
    /// Whether it ended in a branch (for a branches counter).
    pub branch: bool,
    /// What the tracer sees, if anything (direct calls and straight-line
    /// code make no packet).
    pub event: Option<TraceEvent>,
}

impl Thread {
    /// A thread `pid`/`tid` starting in `main` (the first function).
    pub fn new(pid: u32, tid: u32, binary: &Binary, seed: u64) -> Thread {
        let mut rng = SplitMix64::new(seed);
        let ip = binary.block(0, &mut rng);
        Thread {
            pid,
            tid,
            ip,
            stack: Vec::new(),
            rng,
        }
    }

    /// Runs one basic block and the branch that ends it.
    pub fn step(&mut self, binary: &Binary) -> Step {
        let r = &mut self.rng;
        let instructions = 1 + r.below(12);
        let cycles = instructions * (1 + r.below(3));
        let f = binary.function_of(self.ip);
        let (start, len) = binary.functions[f];
        self.ip = start + (self.ip + 4 * instructions - start) % len;
        let kind = r.below(100);
        let event = if kind < 55 {
            let taken = r.chance(55);
            if taken {
                self.ip = binary.block(f, r);
            }
            Some(TraceEvent::Conditional {
                taken,
                next: self.ip,
            })
        } else if kind < 67 {
            // A direct call: no packet.
            if self.stack.len() < 48 {
                self.stack.push(self.ip + 5);
                let callee = r.below(binary.functions.len() as u64) as usize;
                self.ip = binary.functions[callee].0;
            }
            None
        } else if kind < 79 {
            match self.stack.pop() {
                Some(ret) => {
                    self.ip = ret;
                    Some(TraceEvent::Indirect { target: ret })
                }
                None => Some(TraceEvent::Conditional {
                    taken: false,
                    next: self.ip,
                }),
            }
        } else if kind < 83 {
            let target = r.below(binary.functions.len() as u64) as usize;
            self.ip = binary.block(target, r);
            Some(TraceEvent::Indirect { target: self.ip })
        } else {
            None
        };
        Step {
            cycles,
            instructions,
            branch: event.is_some(),
            event,
        }
    }
}

/// The kernel's interrupt handler: a few blocks of conditional branches
/// inside [`KERNEL_IRQ`], drawn from `rng`.
pub fn irq_handler(rng: &mut SplitMix64) -> impl Iterator<Item = (u64, Step)> + '_ {
    let blocks = 3 + rng.below(6);
    (0..blocks).map(move |_| {
        let instructions = 2 + rng.below(10);
        let ip = KERNEL_IRQ + 16 * rng.below(KERNEL_IRQ_SIZE / 16);
        (
            ip,
            Step {
                cycles: instructions * 2,
                instructions,
                branch: true,
                event: Some(TraceEvent::Conditional {
                    taken: rng.chance(50),
                    next: ip,
                }),
            },
        )
    })
}
