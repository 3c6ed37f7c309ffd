// SPDX-License-Identifier: MIT OR Apache-2.0
//! The simulated program as an ELF file perf can read: ET_EXEC, one
//! PT_LOAD from file offset 0 (so that `file offset = ip - start` for an
//! MMAP record of `start` and page offset 0), `.text` and `.rodata` (the
//! jump tables), a `.note.gnu.build-id` (also as PT_NOTE), and `.symtab`
//! with one FUNC symbol per function.

use object::Endianness;
use object::elf;
use object::write::StreamingBuffer;
use object::write::elf::{FileHeader, ProgramHeader, SectionHeader, Sym, Writer};

use super::code::Code;

/// Where the file's first byte is mapped: the code starts one page later.
pub fn load_base(code: &Code) -> u64 {
    code.text_base - TEXT_OFFSET
}

/// File offset of `.text`.
const TEXT_OFFSET: u64 = 0x1000;

/// The GNU build-id of `code`: a 160-bit digest of its bytes and layout
/// (FNV-1a, five lanes; not cryptographic, only distinct per program).
pub fn build_id(code: &Code) -> [u8; 20] {
    let mut id = [0u8; 20];
    for (lane, chunk) in id.chunks_mut(4).enumerate() {
        let mut h: u32 = 0x811c_9dc5 ^ (lane as u32).wrapping_mul(0x9e37_79b9);
        let bytes = code.text_base.to_le_bytes();
        for &b in bytes.iter().chain(&code.text).chain(&code.data) {
            h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
        }
        chunk.copy_from_slice(&h.to_le_bytes());
    }
    id
}

/// The ELF image of `code`.
pub fn image(code: &Code) -> Result<Vec<u8>, String> {
    let mut note = Vec::new();
    note.extend_from_slice(&4u32.to_le_bytes()); // namesz
    note.extend_from_slice(&20u32.to_le_bytes()); // descsz
    note.extend_from_slice(&elf::NT_GNU_BUILD_ID.to_le_bytes());
    note.extend_from_slice(b"GNU\0");
    note.extend_from_slice(&build_id(code));

    let mut out = Vec::new();
    let mut buffer = StreamingBuffer::new(&mut out);
    let mut w = Writer::new(Endianness::Little, true, &mut buffer);
    let base = load_base(code);

    // Reserve, in file order.
    w.reserve_file_header();
    w.reserve_program_headers(2);
    let note_offset = w.reserve(note.len(), 4);
    w.reserve_until(TEXT_OFFSET as usize);
    let text_offset = w.reserve(code.text.len(), 16);
    let data_offset = w.reserve(code.data.len(), 8);
    let load_end = w.reserved_len();

    w.reserve_null_section_index();
    let note_name = w.add_section_name(b".note.gnu.build-id");
    let _note_index = w.reserve_section_index();
    let text_name = w.add_section_name(b".text");
    let text_index = w.reserve_section_index();
    let data_name = w.add_section_name(b".rodata");
    let _data_index = w.reserve_section_index();
    let names: Vec<_> = code
        .functions
        .iter()
        .map(|f| w.add_string(f.name.as_bytes()))
        .collect();
    w.reserve_null_symbol_index();
    for _ in &code.functions {
        w.reserve_symbol_index(Some(text_index));
    }
    w.reserve_symtab_section_index();
    w.reserve_symtab();
    w.reserve_strtab_section_index();
    w.reserve_strtab();
    w.reserve_shstrtab_section_index();
    w.reserve_shstrtab();
    w.reserve_section_headers();

    // Write.
    w.write_file_header(&FileHeader {
        os_abi: elf::ELFOSABI_NONE,
        abi_version: 0,
        e_type: elf::ET_EXEC,
        e_machine: elf::EM_X86_64,
        e_entry: code.functions[0].start,
        e_flags: 0,
    })
    .map_err(|e| format!("ELF header: {e}"))?;
    w.write_align_program_headers();
    w.write_program_header(&ProgramHeader {
        p_type: elf::PT_LOAD,
        p_flags: elf::PF_R | elf::PF_X,
        p_offset: 0,
        p_vaddr: base,
        p_paddr: base,
        p_filesz: load_end as u64,
        p_memsz: load_end as u64,
        p_align: 0x1000,
    });
    w.write_program_header(&ProgramHeader {
        p_type: elf::PT_NOTE,
        p_flags: elf::PF_R,
        p_offset: note_offset as u64,
        p_vaddr: base + note_offset as u64,
        p_paddr: base + note_offset as u64,
        p_filesz: note.len() as u64,
        p_memsz: note.len() as u64,
        p_align: 4,
    });
    w.pad_until(note_offset);
    w.write(&note);
    w.pad_until(text_offset);
    w.write(&code.text);
    w.pad_until(data_offset);
    w.write(&code.data);

    w.write_null_symbol();
    for (f, name) in code.functions.iter().zip(&names) {
        w.write_symbol(&Sym {
            name: Some(*name),
            section: Some(text_index),
            st_info: (elf::STB_GLOBAL << 4) | elf::STT_FUNC,
            st_other: elf::STV_DEFAULT,
            st_shndx: 0,
            st_value: f.start,
            st_size: f.end - f.start,
        });
    }
    w.write_strtab();
    w.write_shstrtab();

    w.write_null_section_header();
    w.write_section_header(&SectionHeader {
        name: Some(note_name),
        sh_type: elf::SHT_NOTE,
        sh_flags: u64::from(elf::SHF_ALLOC),
        sh_addr: base + note_offset as u64,
        sh_offset: note_offset as u64,
        sh_size: note.len() as u64,
        sh_link: 0,
        sh_info: 0,
        sh_addralign: 4,
        sh_entsize: 0,
    });
    w.write_section_header(&SectionHeader {
        name: Some(text_name),
        sh_type: elf::SHT_PROGBITS,
        sh_flags: u64::from(elf::SHF_ALLOC | elf::SHF_EXECINSTR),
        sh_addr: code.text_base,
        sh_offset: text_offset as u64,
        sh_size: code.text.len() as u64,
        sh_link: 0,
        sh_info: 0,
        sh_addralign: 16,
        sh_entsize: 0,
    });
    w.write_section_header(&SectionHeader {
        name: Some(data_name),
        sh_type: elf::SHT_PROGBITS,
        sh_flags: u64::from(elf::SHF_ALLOC),
        sh_addr: code.data_base,
        sh_offset: data_offset as u64,
        sh_size: code.data.len() as u64,
        sh_link: 0,
        sh_info: 0,
        sh_addralign: 8,
        sh_entsize: 0,
    });
    w.write_symtab_section_header(1);
    w.write_strtab_section_header();
    w.write_shstrtab_section_header();
    debug_assert_eq!(w.reserved_len(), w.len());
    drop(w);
    buffer.result().map_err(|e| format!("ELF image: {e}"))?;
    drop(buffer);
    if text_offset as u64 != TEXT_OFFSET
        || code.data_base - code.text_base != code.text.len() as u64
    {
        return Err("ELF layout: .text must start one page in, the tables right after it".into());
    }
    Ok(out)
}
