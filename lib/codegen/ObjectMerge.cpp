//===- ObjectMerge.cpp - several relocatable ELF objects made one ---------===//
//
// The CPU code generator builds a large module as partitions, each optimized
// and compiled in a thread of its own (CpuTarget.cpp), and writes one object.
// This joins the partitions' objects the way `ld -r` would, for the objects
// LLVM writes for gradc's modules: ELF64 little endian with RELA relocations
// (x86-64, AArch64), no groups, no common symbols.
//
//  * Sections of the same name, type, flags and entry size are concatenated
//    in object order, each input at its own alignment.
//  * Symbols: a section symbol becomes the output section's (the offset of
//    its input goes into the addends that use it); other local symbols keep
//    their names, at their input's offset; a global definition is unique by
//    name. A hidden definition is what a partition exported only for another
//    partition (a kernel that an entry point calls, the runtime's task
//    scheduler): once every reference to it is bound, it becomes local, as it
//    was in the module before the split. Undefined names that one of the
//    objects defines bind to that definition; the rest stay undefined once.
//  * Relocations move with their sections (offsets shifted, symbols renumbered).
//
// Anything else in an input is an internal error, never a silently wrong
// object: the caller compiles such a target in one partition.
//
//===----------------------------------------------------------------------===//
#include "Emitter.h"

#include "gradc/support/Diagnostics.h"

#include <llvm/BinaryFormat/ELF.h>

#include <cstring>
#include <map>
#include <tuple>

using namespace llvm;

namespace gradc::codegen {
namespace {

constexpr const char *kPass = "codegen (object merge)";

template <typename T> T read_at(const std::string &bytes, uint64_t offset) {
  GRADC_CHECK(offset + sizeof(T) <= bytes.size(), kPass, "a partition's object is truncated");
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof(T));
  return value;
}

template <typename T> void append(std::string &out, const T &value) {
  out.append(reinterpret_cast<const char *>(&value), sizeof(T));
}

void pad_to(std::string &out, uint64_t align) {
  if (align > 1)
    out.resize((out.size() + align - 1) / align * align, '\0');
}

uint64_t align_up(uint64_t n, uint64_t align) { return align > 1 ? (n + align - 1) / align * align : n; }

/// One input object, its headers read.
struct Input {
  const std::string *bytes = nullptr;
  ELF::Elf64_Ehdr header{};
  std::vector<ELF::Elf64_Shdr> sections;
  std::vector<std::string> names; // per section
  unsigned symtab = 0;            // section index of the symbol table
  std::vector<ELF::Elf64_Sym> symbols;
  std::vector<std::string> symbol_names;
  // Per input section: the output section and the offset of this input in it
  // (out = 0 for sections that are not content: tables, relocations).
  std::vector<unsigned> out;
  std::vector<uint64_t> at;
  // Per symbol: the output symbol it became (an index into Merger::symbols).
  std::vector<size_t> symbol_out;
};

std::string c_string_at(const std::string &bytes, uint64_t table_offset, uint64_t table_size, uint64_t index) {
  GRADC_CHECK(index < table_size, kPass, "a name lies outside its string table");
  const char *start = bytes.data() + table_offset + index;
  return std::string(start, strnlen(start, table_size - index));
}

Input read_input(const std::string &bytes) {
  Input in;
  in.bytes = &bytes;
  in.header = read_at<ELF::Elf64_Ehdr>(bytes, 0);
  const auto &h = in.header;
  GRADC_CHECK(std::memcmp(h.e_ident, ELF::ElfMagic, 4) == 0 && h.e_ident[ELF::EI_CLASS] == ELF::ELFCLASS64 &&
                  h.e_ident[ELF::EI_DATA] == ELF::ELFDATA2LSB && h.e_type == ELF::ET_REL,
              kPass, "a partition's object is not an ELF64 little-endian relocatable object");
  GRADC_CHECK(h.e_shnum > 0 && h.e_shstrndx < h.e_shnum && h.e_shentsize == sizeof(ELF::Elf64_Shdr), kPass,
              "a partition's object has extended section numbering");
  for (unsigned i = 0; i < h.e_shnum; ++i)
    in.sections.push_back(read_at<ELF::Elf64_Shdr>(bytes, h.e_shoff + uint64_t(i) * sizeof(ELF::Elf64_Shdr)));
  const ELF::Elf64_Shdr &names = in.sections[h.e_shstrndx];
  for (const ELF::Elf64_Shdr &s : in.sections)
    in.names.push_back(c_string_at(bytes, names.sh_offset, names.sh_size, s.sh_name));
  for (unsigned i = 0; i < in.sections.size(); ++i)
    if (in.sections[i].sh_type == ELF::SHT_SYMTAB) {
      GRADC_CHECK(in.symtab == 0, kPass, "a partition's object has two symbol tables");
      in.symtab = i;
    }
  GRADC_CHECK(in.symtab != 0, kPass, "a partition's object has no symbol table");
  const ELF::Elf64_Shdr &symtab = in.sections[in.symtab];
  const ELF::Elf64_Shdr &strtab = in.sections.at(symtab.sh_link);
  for (uint64_t i = 0; i < symtab.sh_size / sizeof(ELF::Elf64_Sym); ++i) {
    in.symbols.push_back(read_at<ELF::Elf64_Sym>(bytes, symtab.sh_offset + i * sizeof(ELF::Elf64_Sym)));
    in.symbol_names.push_back(c_string_at(bytes, strtab.sh_offset, strtab.sh_size, in.symbols.back().st_name));
  }
  return in;
}

/// Whether the section holds code or data that goes into the output (as
/// opposed to the tables the output rebuilds).
bool is_content(const ELF::Elf64_Shdr &s, const std::string &name) {
  switch (s.sh_type) {
  case ELF::SHT_PROGBITS:
  case ELF::SHT_NOBITS:
  case ELF::SHT_NOTE:
  case ELF::SHT_INIT_ARRAY:
  case ELF::SHT_FINI_ARRAY:
  case ELF::SHT_PREINIT_ARRAY:
  case ELF::SHT_X86_64_UNWIND:
    GRADC_CHECK(!(s.sh_flags & (ELF::SHF_GROUP | ELF::SHF_LINK_ORDER)), kPass,
                "section " + name + " is in a group or ordered by a link: not merged");
    return true;
  case ELF::SHT_NULL:
  case ELF::SHT_SYMTAB:
  case ELF::SHT_STRTAB:
  case ELF::SHT_RELA:
    return false;
  default:
    internal_error(kPass, "section " + name + " of type " + std::to_string(s.sh_type) + " cannot be merged");
  }
}

struct OutSection {
  std::string name;
  ELF::Elf64_Shdr header{};
  std::string data; // empty for NOBITS
  uint64_t size = 0;
  std::vector<ELF::Elf64_Rela> relocations;
};

struct OutSymbol {
  std::string name;
  ELF::Elf64_Sym sym{};
  bool local = false;
};

class Merger {
public:
  explicit Merger(const std::vector<std::string> &objects) {
    for (const std::string &o : objects)
      inputs_.push_back(read_input(o));
    for (const Input &in : inputs_)
      GRADC_CHECK(in.header.e_machine == inputs_[0].header.e_machine, kPass, "the partitions' machines differ");
  }

  std::string run() {
    place_sections();
    bind_symbols();
    move_relocations();
    return write();
  }

private:
  void place_sections() {
    std::map<std::tuple<std::string, uint32_t, uint64_t, uint64_t>, unsigned> by_key;
    for (Input &in : inputs_) {
      in.out.assign(in.sections.size(), 0);
      in.at.assign(in.sections.size(), 0);
      for (unsigned i = 0; i < in.sections.size(); ++i) {
        const ELF::Elf64_Shdr &s = in.sections[i];
        if (!is_content(s, in.names[i]))
          continue;
        auto key = std::make_tuple(in.names[i], s.sh_type, s.sh_flags, s.sh_entsize);
        auto [it, fresh] = by_key.try_emplace(key, unsigned(sections_.size()) + 1);
        if (fresh) {
          OutSection o;
          o.name = in.names[i];
          o.header.sh_type = s.sh_type;
          o.header.sh_flags = s.sh_flags;
          o.header.sh_entsize = s.sh_entsize;
          o.header.sh_addralign = 1;
          sections_.push_back(std::move(o));
        }
        OutSection &o = sections_[it->second - 1];
        uint64_t align = std::max<uint64_t>(1, s.sh_addralign);
        o.header.sh_addralign = std::max<uint64_t>(o.header.sh_addralign, align);
        uint64_t at = align_up(o.size, align);
        if (s.sh_type != ELF::SHT_NOBITS) {
          GRADC_CHECK(s.sh_offset + s.sh_size <= in.bytes->size(), kPass, "section " + in.names[i] + " is truncated");
          o.data.resize(at, '\0');
          o.data.append(*in.bytes, s.sh_offset, s.sh_size);
        }
        o.size = at + s.sh_size;
        in.out[i] = it->second;
        in.at[i] = at;
      }
    }
  }

  /// The output section of input section `shndx` of `in`, for a symbol.
  uint16_t symbol_section(const Input &in, uint16_t shndx, const std::string &name) const {
    if (shndx == ELF::SHN_UNDEF || shndx == ELF::SHN_ABS)
      return shndx;
    GRADC_CHECK(shndx < in.sections.size() && in.out[shndx] != 0, kPass,
                "symbol " + name + " lies in a section that is not merged");
    return uint16_t(in.out[shndx]);
  }

  void bind_symbols() {
    // One section symbol per output section, first among the locals.
    for (unsigned s = 0; s < sections_.size(); ++s) {
      OutSymbol sym;
      sym.local = true;
      sym.sym.st_info = ELF::STT_SECTION; // local binding
      sym.sym.st_shndx = uint16_t(s + 1);
      symbols_.push_back(sym);
    }
    std::map<std::string, size_t> defined;
    for (Input &in : inputs_) {
      in.symbol_out.assign(in.symbols.size(), SIZE_MAX);
      for (size_t i = 1; i < in.symbols.size(); ++i) {
        const ELF::Elf64_Sym &s = in.symbols[i];
        const std::string &name = in.symbol_names[i];
        GRADC_CHECK(s.st_shndx != ELF::SHN_COMMON && s.st_shndx != ELF::SHN_XINDEX, kPass,
                    "symbol " + name + " is common or has an extended section index");
        uint8_t type = s.getType(), binding = s.getBinding();
        if (type == ELF::STT_FILE)
          continue; // names the source; nothing refers to it
        if (type == ELF::STT_SECTION) {
          GRADC_CHECK(s.st_shndx < in.sections.size() && in.out[s.st_shndx] != 0, kPass,
                      "a section symbol of a section that is not merged");
          in.symbol_out[i] = in.out[s.st_shndx] - 1;
          continue;
        }
        if (s.st_shndx == ELF::SHN_UNDEF)
          continue; // bound below, once every definition is known
        OutSymbol out;
        out.name = name;
        out.sym = s;
        out.sym.st_shndx = symbol_section(in, s.st_shndx, name);
        if (s.st_shndx != ELF::SHN_ABS)
          out.sym.st_value += in.at[s.st_shndx];
        bool hidden = (s.st_other & 3) == ELF::STV_HIDDEN;
        out.local = binding == ELF::STB_LOCAL || hidden;
        if (out.local && binding != ELF::STB_LOCAL) {
          out.sym.setBindingAndType(ELF::STB_LOCAL, type);
          out.sym.st_other &= ~3u; // default visibility, as for any local
        }
        in.symbol_out[i] = symbols_.size();
        if (binding != ELF::STB_LOCAL)
          GRADC_CHECK(defined.emplace(name, symbols_.size()).second, kPass, "two partitions define " + name);
        symbols_.push_back(out);
      }
    }
    std::map<std::string, size_t> undefined;
    for (Input &in : inputs_)
      for (size_t i = 1; i < in.symbols.size(); ++i) {
        const ELF::Elf64_Sym &s = in.symbols[i];
        if (s.st_shndx != ELF::SHN_UNDEF || s.getType() == ELF::STT_FILE || s.getType() == ELF::STT_SECTION)
          continue;
        const std::string &name = in.symbol_names[i];
        if (auto d = defined.find(name); d != defined.end()) {
          in.symbol_out[i] = d->second;
          continue;
        }
        auto [it, fresh] = undefined.try_emplace(name, symbols_.size());
        if (fresh) {
          OutSymbol out;
          out.name = name;
          out.sym = s;
          symbols_.push_back(out);
        }
        in.symbol_out[i] = it->second;
      }
    // Locals first (ELF): a stable partition keeps each group in order.
    std::vector<size_t> order;
    for (size_t i = 0; i < symbols_.size(); ++i)
      if (symbols_[i].local)
        order.push_back(i);
    first_global_ = order.size() + 1;
    for (size_t i = 0; i < symbols_.size(); ++i)
      if (!symbols_[i].local)
        order.push_back(i);
    index_.assign(symbols_.size(), 0);
    for (size_t k = 0; k < order.size(); ++k)
      index_[order[k]] = uint32_t(k + 1);
    order_ = std::move(order);
  }

  void move_relocations() {
    for (Input &in : inputs_)
      for (unsigned r = 0; r < in.sections.size(); ++r) {
        const ELF::Elf64_Shdr &rs = in.sections[r];
        if (rs.sh_type != ELF::SHT_RELA)
          continue;
        GRADC_CHECK(rs.sh_link == in.symtab && rs.sh_info < in.sections.size() && in.out[rs.sh_info] != 0, kPass,
                    "relocations " + in.names[r] + " apply to a section that is not merged");
        OutSection &target = sections_[in.out[rs.sh_info] - 1];
        uint64_t shift = in.at[rs.sh_info];
        for (uint64_t k = 0; k < rs.sh_size / sizeof(ELF::Elf64_Rela); ++k) {
          ELF::Elf64_Rela rel = read_at<ELF::Elf64_Rela>(*in.bytes, rs.sh_offset + k * sizeof(ELF::Elf64_Rela));
          uint32_t sym = rel.getSymbol(), type = rel.getType();
          uint32_t out_sym = 0;
          if (sym != 0) {
            GRADC_CHECK(sym < in.symbols.size() && in.symbol_out[sym] != SIZE_MAX, kPass,
                        "a relocation refers to a symbol that is not merged");
            out_sym = index_[in.symbol_out[sym]];
            const ELF::Elf64_Sym &s = in.symbols[sym];
            if (s.getType() == ELF::STT_SECTION)
              rel.r_addend += int64_t(in.at[s.st_shndx]);
          }
          rel.r_offset += shift;
          rel.setSymbolAndType(out_sym, type);
          target.relocations.push_back(rel);
        }
      }
  }

  std::string write() {
    std::string shstrtab(1, '\0'), strtab(1, '\0');
    auto name_in = [](std::string &table, const std::string &name) {
      if (name.empty())
        return uint32_t(0);
      uint32_t at = uint32_t(table.size());
      table += name;
      table += '\0';
      return at;
    };
    std::string out(sizeof(ELF::Elf64_Ehdr), '\0');
    std::vector<ELF::Elf64_Shdr> headers(1); // the null section
    for (OutSection &s : sections_) {
      ELF::Elf64_Shdr h = s.header;
      h.sh_name = name_in(shstrtab, s.name);
      h.sh_size = s.size;
      pad_to(out, h.sh_addralign);
      h.sh_offset = out.size();
      out += s.data;
      headers.push_back(h);
    }
    unsigned symtab_index = unsigned(sections_.size() + 1);
    for (unsigned r = 0; r < sections_.size(); ++r)
      if (!sections_[r].relocations.empty())
        ++symtab_index;
    for (unsigned r = 0; r < sections_.size(); ++r) {
      const OutSection &s = sections_[r];
      if (s.relocations.empty())
        continue;
      ELF::Elf64_Shdr h{};
      h.sh_name = name_in(shstrtab, ".rela" + s.name);
      h.sh_type = ELF::SHT_RELA;
      h.sh_flags = ELF::SHF_INFO_LINK;
      h.sh_link = symtab_index;
      h.sh_info = r + 1;
      h.sh_addralign = 8;
      h.sh_entsize = sizeof(ELF::Elf64_Rela);
      pad_to(out, 8);
      h.sh_offset = out.size();
      for (const ELF::Elf64_Rela &rel : s.relocations)
        append(out, rel);
      h.sh_size = out.size() - h.sh_offset;
      headers.push_back(h);
    }
    ELF::Elf64_Shdr symtab{};
    symtab.sh_name = name_in(shstrtab, ".symtab");
    symtab.sh_type = ELF::SHT_SYMTAB;
    symtab.sh_link = symtab_index + 1;
    symtab.sh_info = uint32_t(first_global_);
    symtab.sh_addralign = 8;
    symtab.sh_entsize = sizeof(ELF::Elf64_Sym);
    pad_to(out, 8);
    symtab.sh_offset = out.size();
    append(out, ELF::Elf64_Sym{});
    for (size_t k : order_) {
      ELF::Elf64_Sym sym = symbols_[k].sym;
      sym.st_name = name_in(strtab, symbols_[k].name);
      append(out, sym);
    }
    symtab.sh_size = out.size() - symtab.sh_offset;
    headers.push_back(symtab);
    auto string_table = [&](const std::string &table, uint32_t name) {
      ELF::Elf64_Shdr h{};
      h.sh_name = name;
      h.sh_type = ELF::SHT_STRTAB;
      h.sh_addralign = 1;
      h.sh_offset = out.size();
      h.sh_size = table.size();
      out += table;
      headers.push_back(h);
    };
    string_table(strtab, name_in(shstrtab, ".strtab"));
    uint32_t shstrtab_name = name_in(shstrtab, ".shstrtab");
    string_table(shstrtab, shstrtab_name);
    pad_to(out, 8);
    ELF::Elf64_Ehdr eh = inputs_[0].header;
    eh.e_shoff = out.size();
    eh.e_shnum = uint16_t(headers.size());
    eh.e_shstrndx = uint16_t(headers.size() - 1);
    GRADC_CHECK(headers.size() < ELF::SHN_LORESERVE, kPass, "too many sections");
    for (const ELF::Elf64_Shdr &h : headers)
      append(out, h);
    std::memcpy(out.data(), &eh, sizeof(eh));
    return out;
  }

  std::vector<Input> inputs_;
  std::vector<OutSection> sections_; // output section i + 1
  std::vector<OutSymbol> symbols_;
  std::vector<size_t> order_;    // symbols_ in symbol-table order
  std::vector<uint32_t> index_;  // per symbols_ entry: its index in the table
  size_t first_global_ = 1;
};

} // namespace

bool can_merge_objects(const Triple &triple) {
  return triple.isOSBinFormatELF() && triple.isArch64Bit() && triple.isLittleEndian() &&
         (triple.getArch() == Triple::x86_64 || triple.getArch() == Triple::aarch64);
}

std::string merge_objects(const std::vector<std::string> &objects) {
  GRADC_CHECK(!objects.empty(), kPass, "no objects to merge");
  if (objects.size() == 1)
    return objects[0];
  return Merger(objects).run();
}

} // namespace gradc::codegen
