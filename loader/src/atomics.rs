//! The static objects a program declares `_Atomic` (C11), from its DWARF: global and static
//! variables whose type is an atomic type, and the atomic members and elements of global
//! structures and arrays, with their link-time addresses (`DW_OP_addr`).
//!
//! On x86-64 a release store or an acquire load of such an object is a plain `mov`, which no
//! hook distinguishes from any other access, and C has no header whose line-table rows would mark
//! it (C++'s `std::atomic` does: `is_cxx_atomic_header`). The object's declared type is the
//! only trace the binary keeps of it; the machine then finds the instructions that name these
//! addresses (`emu::decode`). Read once per object at start-up.
//!
//! Left out: thread-local atomics (their address is per thread), objects in `.debug_types` or
//! reached through `DW_FORM_ref_addr` (LTO's cross-unit types), and heap or stack objects (no
//! address in DWARF: instructions carry no types, so an `_Atomic` member of a `malloc`ed
//! structure cannot be told from its neighbours).

use std::collections::HashMap;

use gimli::{AttributeValue, DwTag, Operation, Unit, UnitOffset};

type Reader = gimli::EndianArcSlice<gimli::RunTimeEndian>;

/// Most ranges kept for one object: an array of a million structures with an atomic member each
/// would otherwise be a million ranges (the first ones are kept; the rest stay unseen).
const MAX_RANGES: usize = 1 << 16;

/// How deep a type chain is followed (typedefs, qualifiers, nested structures and arrays).
const MAX_DEPTH: u32 = 24;

/// The link-time `[start, end)` ranges of the atomic objects `dwarf` declares at fixed addresses,
/// sorted and merged where they touch. Best effort: malformed entries are skipped.
pub(crate) fn atomic_objects(dwarf: &gimli::Dwarf<Reader>) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let mut units = dwarf.units();
    while let Ok(Some(header)) = units.next() {
        let Ok(unit) = dwarf.unit(header) else { continue };
        let mut walk = Walk { unit: &unit, out: &mut out, holds: HashMap::new() };
        let mut entries = unit.entries();
        while let Ok(Some((_, entry))) = entries.next_dfs() {
            if entry.tag() != gimli::DW_TAG_variable {
                continue;
            }
            let Some(addr) = static_address(dwarf, &unit, entry) else { continue };
            let Some(ty) = variable_type(&unit, entry) else { continue };
            walk.object(ty, addr, 0);
            if walk.out.len() >= MAX_RANGES {
                break;
            }
        }
    }
    crate::symbols::merge_ranges(out)
}

/// The address of a variable whose location is the single operation `DW_OP_addr` (or
/// `DW_OP_addrx`): a global or a function's static. Locals, registers and thread-local
/// variables (`DW_OP_form_tls_address` follows the address) have none.
fn static_address(
    dwarf: &gimli::Dwarf<Reader>,
    unit: &Unit<Reader>,
    entry: &gimli::DebuggingInformationEntry<'_, '_, Reader>,
) -> Option<u64> {
    let Ok(Some(AttributeValue::Exprloc(expr))) = entry.attr_value(gimli::DW_AT_location) else { return None };
    let mut ops = expr.operations(unit.encoding());
    let addr = match ops.next().ok()?? {
        Operation::Address { address } => address,
        Operation::AddressIndex { index } => dwarf.address(unit, index).ok()?,
        _ => return None,
    };
    matches!(ops.next(), Ok(None)).then_some(addr)
}

/// A variable's type, from its own `DW_AT_type` or its declaration's (`DW_AT_specification`,
/// `DW_AT_abstract_origin`: a definition outside the declaring scope).
fn variable_type(unit: &Unit<Reader>, entry: &gimli::DebuggingInformationEntry<'_, '_, Reader>) -> Option<UnitOffset> {
    if let Some(t) = type_of(entry) {
        return Some(t);
    }
    for link in [gimli::DW_AT_specification, gimli::DW_AT_abstract_origin] {
        if let Ok(Some(AttributeValue::UnitRef(o))) = entry.attr_value(link) {
            if let Some(t) = unit.entry(o).ok().as_ref().and_then(type_of) {
                return Some(t);
            }
        }
    }
    None
}

fn type_of(entry: &gimli::DebuggingInformationEntry<'_, '_, Reader>) -> Option<UnitOffset> {
    match entry.attr_value(gimli::DW_AT_type) {
        Ok(Some(AttributeValue::UnitRef(o))) => Some(o),
        _ => None,
    }
}

struct Walk<'a> {
    unit: &'a Unit<Reader>,
    out: &'a mut Vec<(u64, u64)>,
    /// [`Walk::has_atomic`] of the unit's types already asked: a C++ unit's globals share
    /// deep class types, whose members would otherwise be walked again for each.
    holds: HashMap<UnitOffset, bool>,
}

impl Walk<'_> {
    /// Records the atomic parts of an object of type `ty` at `addr`.
    fn object(&mut self, ty: UnitOffset, addr: u64, depth: u32) {
        if depth > MAX_DEPTH || self.out.len() >= MAX_RANGES {
            return;
        }
        let Ok(entry) = self.unit.entry(ty) else { return };
        let tag: DwTag = entry.tag();
        match tag {
            gimli::DW_TAG_atomic_type => {
                if let Some(size) = self.size_of(ty, 0).filter(|&s| s > 0) {
                    self.out.push((addr, addr.saturating_add(size)));
                }
            }
            gimli::DW_TAG_typedef
            | gimli::DW_TAG_const_type
            | gimli::DW_TAG_volatile_type
            | gimli::DW_TAG_restrict_type => {
                if let Some(t) = type_of(&entry) {
                    self.object(t, addr, depth + 1);
                }
            }
            gimli::DW_TAG_structure_type | gimli::DW_TAG_union_type | gimli::DW_TAG_class_type => {
                if !self.has_atomic(ty, 0) {
                    return;
                }
                let Ok(mut tree) = self.unit.entries_tree(Some(ty)) else { return };
                let Ok(root) = tree.root() else { return };
                let mut children = root.children();
                let mut members = Vec::new();
                while let Ok(Some(child)) = children.next() {
                    let m = child.entry();
                    if m.tag() != gimli::DW_TAG_member {
                        continue;
                    }
                    // A union's members all start at 0; bit fields cannot be atomic.
                    let off = match m.attr_value(gimli::DW_AT_data_member_location) {
                        Ok(Some(v)) => v.udata_value(),
                        _ => (tag == gimli::DW_TAG_union_type).then_some(0),
                    };
                    if let (Some(off), Some(t)) = (off, type_of(m)) {
                        members.push((off, t));
                    }
                }
                for (off, t) in members {
                    self.object(t, addr.wrapping_add(off), depth + 1);
                }
            }
            gimli::DW_TAG_array_type => {
                let Some(elem) = type_of(&entry) else { return };
                if !self.has_atomic(elem, 0) {
                    return;
                }
                let (Some(count), Some(size)) = (self.array_count(ty), self.size_of(elem, 0)) else { return };
                for i in 0..count {
                    if self.out.len() >= MAX_RANGES {
                        return;
                    }
                    self.object(elem, addr.wrapping_add(i.wrapping_mul(size)), depth + 1);
                }
            }
            _ => {}
        }
    }

    /// Whether type `ty` is or holds an atomic type (pointers do not: what they point to is
    /// elsewhere).
    fn has_atomic(&mut self, ty: UnitOffset, depth: u32) -> bool {
        if depth > MAX_DEPTH {
            return false;
        }
        if let Some(&known) = self.holds.get(&ty) {
            return known;
        }
        // A type that holds itself (through an array of its own kind, never legal) ends here.
        self.holds.insert(ty, false);
        let holds = self.holds_uncached(ty, depth);
        self.holds.insert(ty, holds);
        holds
    }

    fn holds_uncached(&mut self, ty: UnitOffset, depth: u32) -> bool {
        let Ok(entry) = self.unit.entry(ty) else { return false };
        match entry.tag() {
            gimli::DW_TAG_atomic_type => true,
            gimli::DW_TAG_typedef
            | gimli::DW_TAG_const_type
            | gimli::DW_TAG_volatile_type
            | gimli::DW_TAG_restrict_type
            | gimli::DW_TAG_array_type => type_of(&entry).is_some_and(|t| self.has_atomic(t, depth + 1)),
            gimli::DW_TAG_structure_type | gimli::DW_TAG_union_type | gimli::DW_TAG_class_type => {
                let Ok(mut tree) = self.unit.entries_tree(Some(ty)) else { return false };
                let Ok(root) = tree.root() else { return false };
                let mut children = root.children();
                let mut types = Vec::new();
                while let Ok(Some(child)) = children.next() {
                    if child.entry().tag() == gimli::DW_TAG_member {
                        types.extend(type_of(child.entry()));
                    }
                }
                types.into_iter().any(|t| self.has_atomic(t, depth + 1))
            }
            _ => false,
        }
    }

    /// The number of elements of array type `ty` (every dimension's, multiplied); `None` for an
    /// array of unknown bound.
    fn array_count(&self, ty: UnitOffset) -> Option<u64> {
        let mut tree = self.unit.entries_tree(Some(ty)).ok()?;
        let root = tree.root().ok()?;
        let mut children = root.children();
        let mut count = 1u64;
        let mut dims = 0;
        while let Ok(Some(child)) = children.next() {
            let e = child.entry();
            if e.tag() != gimli::DW_TAG_subrange_type {
                continue;
            }
            let n = match e.attr_value(gimli::DW_AT_count) {
                Ok(Some(v)) => v.udata_value()?,
                _ => {
                    let upper = e.attr_value(gimli::DW_AT_upper_bound).ok()??.udata_value()?;
                    let lower = match e.attr_value(gimli::DW_AT_lower_bound) {
                        Ok(Some(v)) => v.udata_value()?,
                        _ => 0,
                    };
                    upper.checked_sub(lower)?.checked_add(1)?
                }
            };
            count = count.checked_mul(n)?;
            dims += 1;
        }
        (dims > 0).then_some(count)
    }

    /// The size in bytes of type `ty`: its `DW_AT_byte_size`, or its underlying type's (an
    /// atomic type, a typedef or a qualifier usually has none), or an array's elements'.
    fn size_of(&self, ty: UnitOffset, depth: u32) -> Option<u64> {
        if depth > MAX_DEPTH {
            return None;
        }
        let entry = self.unit.entry(ty).ok()?;
        if let Ok(Some(v)) = entry.attr_value(gimli::DW_AT_byte_size) {
            return v.udata_value();
        }
        let inner = type_of(&entry)?;
        if entry.tag() == gimli::DW_TAG_array_type {
            return self.array_count(ty)?.checked_mul(self.size_of(inner, depth + 1)?);
        }
        self.size_of(inner, depth + 1)
    }
}
