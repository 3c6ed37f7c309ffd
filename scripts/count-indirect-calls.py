# SPDX-License-Identifier: MIT OR Apache-2.0
# gdb script of scripts/count-indirect-calls: steps through the third call
# of `one_sample` and reports the indirect calls it executes.
import re

import gdb

gdb.execute("set pagination off")
gdb.execute("set style enabled off")
# At the first instruction, before the prologue moves the stack pointer:
# the `ret` that leaves the function finds it there again.
gdb.execute("break *aux_sample::one_sample")
gdb.execute("run", to_string=True)
for _ in range(2):
    gdb.execute("continue", to_string=True)

arch = gdb.selected_frame().architecture()
entry_sp = int(gdb.parse_and_eval("$sp"))
steps = 0
library_calls = 0
calls = []  # (caller function, callee function, callee file)
while steps < 1_000_000:
    pc = int(gdb.parse_and_eval("$pc"))
    sp = int(gdb.parse_and_eval("$sp"))
    asm = arch.disassemble(pc)[0]["asm"]
    if asm.startswith("ret") and sp == entry_sp:
        break
    indirect = re.match(r"call\s+\*", asm) is not None
    caller = gdb.selected_frame().name() if indirect else None
    if caller is not None:
        caller = caller.replace("perfaux::", "")
    gdb.execute("stepi", to_string=True)
    steps += 1
    if indirect:
        pc = int(gdb.parse_and_eval("$pc"))
        if gdb.solib_name(pc) is not None:
            # memcpy through the PLT: the dynamic linker's indirection, a
            # direct call in a kernel build.
            library_calls += 1
            continue
        symbol = gdb.execute("info symbol $pc", to_string=True).split(" in section")[0]
        symbol = re.sub(r"::h[0-9a-f]{16}( \+ \d+)?$", "", symbol.strip())
        # The file of the function itself, not of what is inlined at its start.
        block = gdb.block_for_pc(pc)
        while block.superblock is not None and not block.superblock.is_static:
            block = block.superblock
        where = block.function.symtab.filename if block.function else "?"
        calls.append((caller, symbol, where))

if steps >= 1_000_000:
    raise gdb.GdbError("one_sample did not return within 1,000,000 instructions")
files = sorted({f for _, _, f in calls})
print(f"| one AUX sample: {steps} instructions, {len(calls)} indirect calls "
      f"into {len(files)} files (and {library_calls} into the C library's memcpy)")
for caller, callee, where in calls:
    print(f"|   {callee.replace('perfaux::', '')}  ({where})  from {caller}")
