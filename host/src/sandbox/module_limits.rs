//! The size and count limits of WebAssembly validation (one function's
//! code, its locals, a module's functions, ...), checked before the
//! validator runs, so that a module over one is refused with its own typed
//! error ([`ModuleLimit`], reported as `module_compiler_limit`) and a
//! message that says which limit, by how much, and what to change, instead
//! of `module_invalid` in the validator's wording (issue #11).
//!
//! The values are wasmparser's (`wasmparser/src/limits.rs`, agreed between
//! engines in the JS API specification), which it does not export: they
//! are mirrored here, and a test checks each against wasmparser's own
//! validator, so an upgrade that moves one fails that test rather than
//! letting the validator's error through again. Limits the parser itself
//! enforces while reading (a function type's parameters and results) fail
//! before this walk can count them and stay `module_invalid`.

use wasmparser::{Encoding, Parser, Payload, TypeRef};

use super::LoadError;

/// Bytes of code in one function body.
pub const MAX_FUNCTION_BODY_BYTES: u64 = 7_654_321;
/// Locals of one function, its parameters included.
pub const MAX_FUNCTION_LOCALS: u64 = 50_000;
/// Functions of one core module, imported ones included.
pub const MAX_FUNCTIONS: u64 = 1_000_000;
/// Types of one core module (every type of every recursion group).
pub const MAX_TYPES: u64 = 1_000_000;
/// Entries of one core module's import section.
pub const MAX_IMPORTS: u64 = 1_000_000;
/// Exports of one core module.
pub const MAX_EXPORTS: u64 = 1_000_000;
/// Globals of one core module, imported ones included.
pub const MAX_GLOBALS: u64 = 1_000_000;
/// Data segments of one core module.
pub const MAX_DATA_SEGMENTS: u64 = 100_000;
/// Element segments of one core module.
pub const MAX_ELEMENT_SEGMENTS: u64 = 100_000;
/// Tables of one core module, imported ones included.
pub const MAX_TABLES: u64 = 100;
/// Linear memories of one core module, imported ones included.
pub const MAX_MEMORIES: u64 = 100;

/// One of the validator's limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModuleLimit {
    FunctionBodyBytes,
    FunctionLocals,
    Functions,
    Types,
    Imports,
    Exports,
    Globals,
    DataSegments,
    ElementSegments,
    Tables,
    Memories,
}

impl ModuleLimit {
    /// Every limit checked.
    pub const ALL: [ModuleLimit; 11] = [
        ModuleLimit::FunctionBodyBytes,
        ModuleLimit::FunctionLocals,
        ModuleLimit::Functions,
        ModuleLimit::Types,
        ModuleLimit::Imports,
        ModuleLimit::Exports,
        ModuleLimit::Globals,
        ModuleLimit::DataSegments,
        ModuleLimit::ElementSegments,
        ModuleLimit::Tables,
        ModuleLimit::Memories,
    ];

    /// The largest value accepted.
    pub const fn max(self) -> u64 {
        match self {
            ModuleLimit::FunctionBodyBytes => MAX_FUNCTION_BODY_BYTES,
            ModuleLimit::FunctionLocals => MAX_FUNCTION_LOCALS,
            ModuleLimit::Functions => MAX_FUNCTIONS,
            ModuleLimit::Types => MAX_TYPES,
            ModuleLimit::Imports => MAX_IMPORTS,
            ModuleLimit::Exports => MAX_EXPORTS,
            ModuleLimit::Globals => MAX_GLOBALS,
            ModuleLimit::DataSegments => MAX_DATA_SEGMENTS,
            ModuleLimit::ElementSegments => MAX_ELEMENT_SEGMENTS,
            ModuleLimit::Tables => MAX_TABLES,
            ModuleLimit::Memories => MAX_MEMORIES,
        }
    }

    /// What is counted, in the plural.
    fn counted(self) -> &'static str {
        match self {
            ModuleLimit::FunctionBodyBytes => "bytes of code",
            ModuleLimit::FunctionLocals => "locals (parameters included)",
            ModuleLimit::Functions => "functions",
            ModuleLimit::Types => "types",
            ModuleLimit::Imports => "imports",
            ModuleLimit::Exports => "exports",
            ModuleLimit::Globals => "globals",
            ModuleLimit::DataSegments => "data segments",
            ModuleLimit::ElementSegments => "element segments",
            ModuleLimit::Tables => "tables",
            ModuleLimit::Memories => "linear memories",
        }
    }

    /// What an author can change.
    fn advice(self) -> &'static str {
        match self {
            ModuleLimit::FunctionBodyBytes | ModuleLimit::FunctionLocals => {
                "split it into smaller functions (generated code, a huge `match` or \
                 aggressive inlining usually causes this)"
            }
            ModuleLimit::DataSegments | ModuleLimit::ElementSegments => {
                "merge the segments (a linker or `wasm-opt` does this)"
            }
            _ => {
                "split the unit or leave out code it does not use (build with LTO, \
                  strip unused dependencies)"
            }
        }
    }

    /// The message for a module with `found` where at most `max` fit;
    /// `function` is the function's index for per-function limits.
    pub fn explain(self, found: u64, function: Option<u32>) -> String {
        let max = self.max();
        let counted = self.counted();
        let advice = self.advice();
        let (whose, scope) = match function {
            Some(index) => (format!("function {index} of a core module"), "one function"),
            None => ("a core module".to_owned(), "one module"),
        };
        format!(
            "{whose} has {found} {counted}, more than the {max} WebAssembly validation allows in \
             {scope}; {advice}"
        )
    }
}

/// What the walk has counted of the core module it is in.
#[derive(Default)]
struct Module {
    /// Parameter counts of the module's types, by type index (`None` for a
    /// type that is not a function type).
    params: Vec<Option<u64>>,
    /// Type index of every function, imported ones first.
    functions: Vec<u32>,
    imported_functions: u64,
    globals: u64,
    tables: u64,
    memories: u64,
    /// Code entries seen, to find each one's function.
    bodies: u64,
}

/// Why the walk stops early.
enum Stop {
    /// A limit is passed.
    Refused(LoadError),
    /// The bytes do not parse: the validator will say why.
    Unparsable,
}

impl From<wasmparser::BinaryReaderError> for Stop {
    fn from(_: wasmparser::BinaryReaderError) -> Self {
        Stop::Unparsable
    }
}

fn check(limit: ModuleLimit, found: u64, function: Option<u32>) -> Result<(), Stop> {
    if found > limit.max() {
        Err(Stop::Refused(LoadError::CompilerLimit {
            limit,
            found,
            function,
        }))
    } else {
        Ok(())
    }
}

/// Refuses a component one of whose core modules is over a validation
/// limit. Whatever does not parse is left to the validator, which explains
/// it better.
pub(crate) fn check_module_limits(bytes: &[u8]) -> Result<(), LoadError> {
    let mut module = Module::default();
    for payload in Parser::new(0).parse_all(bytes) {
        match payload
            .map_err(Stop::from)
            .and_then(|p| visit(&mut module, p))
        {
            Ok(()) => {}
            Err(Stop::Refused(e)) => return Err(e),
            Err(Stop::Unparsable) => return Ok(()),
        }
    }
    Ok(())
}

/// Counts what `payload` adds to the core module being walked. Core
/// modules cannot nest, so every core section belongs to the module whose
/// header came last.
fn visit(module: &mut Module, payload: Payload<'_>) -> Result<(), Stop> {
    match payload {
        Payload::Version {
            encoding: Encoding::Module,
            ..
        } => *module = Module::default(),
        // Counts are checked as declared, before anything is collected, and
        // again as entries add up: a hostile count never sizes a vector.
        Payload::TypeSection(reader) => {
            let declared = module.params.len() as u64 + u64::from(reader.count());
            check(ModuleLimit::Types, declared, None)?;
            for group in reader {
                for ty in group?.types() {
                    let params = match &ty.composite_type.inner {
                        wasmparser::CompositeInnerType::Func(f) => Some(f.params().len() as u64),
                        _ => None,
                    };
                    module.params.push(params);
                }
                check(ModuleLimit::Types, module.params.len() as u64, None)?;
            }
        }
        Payload::ImportSection(reader) => {
            check(ModuleLimit::Imports, u64::from(reader.count()), None)?;
            for import in reader.into_imports() {
                match import?.ty {
                    TypeRef::Func(ty) | TypeRef::FuncExact(ty) => {
                        module.functions.push(ty);
                        module.imported_functions += 1;
                    }
                    TypeRef::Global(_) => module.globals += 1,
                    TypeRef::Table(_) => module.tables += 1,
                    TypeRef::Memory(_) => module.memories += 1,
                    TypeRef::Tag(_) => {}
                }
                check_counts(module)?;
            }
        }
        Payload::FunctionSection(reader) => {
            let declared = module.functions.len() as u64 + u64::from(reader.count());
            check(ModuleLimit::Functions, declared, None)?;
            for ty in reader {
                module.functions.push(ty?);
            }
        }
        Payload::GlobalSection(reader) => {
            module.globals += u64::from(reader.count());
            check_counts(module)?;
        }
        Payload::TableSection(reader) => {
            module.tables += u64::from(reader.count());
            check_counts(module)?;
        }
        Payload::MemorySection(reader) => {
            module.memories += u64::from(reader.count());
            check_counts(module)?;
        }
        Payload::ExportSection(reader) => {
            check(ModuleLimit::Exports, u64::from(reader.count()), None)?;
        }
        Payload::DataCountSection { count, .. } => {
            check(ModuleLimit::DataSegments, u64::from(count), None)?;
        }
        Payload::DataSection(reader) => {
            check(ModuleLimit::DataSegments, u64::from(reader.count()), None)?;
        }
        Payload::ElementSection(reader) => {
            check(
                ModuleLimit::ElementSegments,
                u64::from(reader.count()),
                None,
            )?;
        }
        Payload::CodeSectionEntry(body) => {
            let defined = module.bodies;
            module.bodies += 1;
            let index = module.imported_functions + defined;
            let function = u32::try_from(index).ok();
            check(
                ModuleLimit::FunctionBodyBytes,
                body.range().len() as u64,
                function,
            )?;
            let params = module
                .functions
                .get(usize::try_from(index).unwrap_or(usize::MAX))
                .and_then(|ty| module.params.get(*ty as usize).copied().flatten())
                .unwrap_or(0);
            let mut locals = params;
            for entry in body.get_locals_reader()? {
                let (count, _) = entry?;
                locals += u64::from(count);
                // Checked at every step: a huge count must not be summed
                // further (nor overflow the reader's own total).
                check(ModuleLimit::FunctionLocals, locals, function)?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// The limits on what imports and definitions add up to.
fn check_counts(module: &Module) -> Result<(), Stop> {
    check(ModuleLimit::Functions, module.functions.len() as u64, None)?;
    check(ModuleLimit::Globals, module.globals, None)?;
    check(ModuleLimit::Tables, module.tables, None)?;
    check(ModuleLimit::Memories, module.memories, None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasm_encoder::{
        CodeSection, ConstExpr, DataSection, ElementSection, Elements, EntityType, ExportKind,
        ExportSection, Function, FunctionSection, GlobalSection, GlobalType, ImportSection,
        MemorySection, MemoryType, Module, RefType, TableSection, TableType, TypeSection, ValType,
    };

    /// A core module with `n` of what `limit` counts (for the per-function
    /// limits, one function of `n` bytes or locals), valid otherwise.
    fn module_with(limit: ModuleLimit, n: u64) -> Vec<u8> {
        let count = u32::try_from(n).expect("fits");
        let mut module = Module::new();
        let mut types = TypeSection::new();
        let repeat = |k: u32| 0..k;
        match limit {
            ModuleLimit::Types => repeat(count).for_each(|_| {
                types.ty().function([], []);
            }),
            // One parameter, counted with the locals.
            ModuleLimit::FunctionLocals => types.ty().function([ValType::I32], []),
            _ => types.ty().function([], []),
        }
        module.section(&types);
        let mut functions = FunctionSection::new();
        let mut code = CodeSection::new();
        let mut bodies = |k: u32, function: &dyn Fn() -> Function| {
            for _ in 0..k {
                functions.function(0);
                code.function(&function());
            }
        };
        match limit {
            ModuleLimit::Imports => {
                let mut imports = ImportSection::new();
                repeat(count).for_each(|_| {
                    imports.import("m", "f", EntityType::Function(0));
                });
                module.section(&imports);
            }
            ModuleLimit::FunctionBodyBytes => bodies(1, &|| {
                // The body is the locals' count (one byte), nops, `end`.
                let mut f = Function::new([]);
                f.raw(std::iter::repeat_n(
                    0x01,
                    usize::try_from(n - 2).expect("fits"),
                ));
                f.raw([0x0b]);
                f
            }),
            ModuleLimit::FunctionLocals => bodies(1, &|| {
                let mut f = Function::new([(count - 1, ValType::I64)]);
                f.raw([0x0b]);
                f
            }),
            ModuleLimit::Functions => bodies(count, &|| {
                let mut f = Function::new([]);
                f.raw([0x0b]);
                f
            }),
            ModuleLimit::Exports => bodies(1, &|| {
                let mut f = Function::new([]);
                f.raw([0x0b]);
                f
            }),
            _ => {}
        }
        if !functions.is_empty() {
            module.section(&functions);
        }
        match limit {
            ModuleLimit::Tables => {
                let mut tables = TableSection::new();
                repeat(count).for_each(|_| {
                    tables.table(TableType {
                        element_type: RefType::FUNCREF,
                        table64: false,
                        minimum: 0,
                        maximum: None,
                        shared: false,
                    });
                });
                module.section(&tables);
            }
            ModuleLimit::Memories => {
                let mut memories = MemorySection::new();
                repeat(count).for_each(|_| {
                    memories.memory(MemoryType {
                        minimum: 0,
                        maximum: None,
                        memory64: false,
                        shared: false,
                        page_size_log2: None,
                    });
                });
                module.section(&memories);
            }
            ModuleLimit::Globals => {
                let mut globals = GlobalSection::new();
                repeat(count).for_each(|_| {
                    globals.global(
                        GlobalType {
                            val_type: ValType::I32,
                            mutable: false,
                            shared: false,
                        },
                        &ConstExpr::i32_const(0),
                    );
                });
                module.section(&globals);
            }
            ModuleLimit::Exports => {
                let mut exports = ExportSection::new();
                repeat(count).for_each(|i| {
                    exports.export(&format!("e{i}"), ExportKind::Func, 0);
                });
                module.section(&exports);
            }
            ModuleLimit::ElementSegments => {
                let mut elements = ElementSection::new();
                repeat(count).for_each(|_| {
                    elements.passive(Elements::Functions(std::borrow::Cow::Borrowed(&[])));
                });
                module.section(&elements);
            }
            _ => {}
        }
        if !code.is_empty() {
            module.section(&code);
        }
        if limit == ModuleLimit::DataSegments {
            let mut data = DataSection::new();
            repeat(count).for_each(|_| {
                data.passive([]);
            });
            module.section(&data);
        }
        module.finish()
    }

    /// `module` inside a component, as units are uploaded.
    fn component(module: &[u8]) -> Vec<u8> {
        let mut component = wasm_encoder::Component::new();
        component.section(&wasm_encoder::RawSection {
            id: wasm_encoder::ComponentSectionId::CoreModule as u8,
            data: module,
        });
        component.finish()
    }

    /// Each limit: a module at it passes our check and wasmparser's
    /// validator; one past it is refused by our check, typed, naming the
    /// limit and the count, and by the validator too (so our value is
    /// neither stricter nor looser than wasmparser's).
    #[test]
    fn every_validation_limit_has_its_own_typed_error_and_matches_wasmparser() {
        for limit in ModuleLimit::ALL {
            let at = module_with(limit, limit.max());
            let over = module_with(limit, limit.max() + 1);
            // Every import and export also adds at least one to the
            // module's "effective type size", which wasmparser caps at
            // 1,000,000 too: a module at the import or export limit is
            // over that one (not checked here), so only the module past
            // the limit is compared for those two.
            let shadowed = matches!(limit, ModuleLimit::Imports | ModuleLimit::Exports);
            let valid = wasmparser::Validator::new().validate_all(&at).err();
            assert!(
                shadowed || valid.is_none(),
                "{limit:?}: wasmparser refuses a module at the limit: {valid:?}"
            );
            assert!(
                wasmparser::Validator::new().validate_all(&over).is_err(),
                "{limit:?}: wasmparser accepts a module over the limit; update the mirror"
            );
            assert_eq!(
                check_module_limits(&component(&at)).map_err(|e| e.to_string()),
                Ok(()),
                "{limit:?}"
            );
            let refused = check_module_limits(&component(&over));
            let Err(LoadError::CompilerLimit {
                limit: which,
                found,
                function,
            }) = &refused
            else {
                panic!("{limit:?}: {refused:?}");
            };
            assert_eq!((*which, *found), (limit, limit.max() + 1), "{limit:?}");
            let per_function = matches!(
                limit,
                ModuleLimit::FunctionBodyBytes | ModuleLimit::FunctionLocals
            );
            assert_eq!(function.is_some(), per_function, "{limit:?}");
            let message = refused.err().map(|e| e.to_string()).unwrap_or_default();
            assert!(
                message.contains(&(limit.max() + 1).to_string())
                    && message.contains(&limit.max().to_string()),
                "{limit:?}: {message}"
            );
        }
    }

    #[test]
    fn the_check_runs_before_validation_and_leaves_unparsable_bytes_to_it() {
        let over = component(&module_with(
            ModuleLimit::FunctionLocals,
            MAX_FUNCTION_LOCALS + 1,
        ));
        assert!(matches!(
            super::super::validate::check_bytes(&over),
            Err(LoadError::CompilerLimit {
                limit: ModuleLimit::FunctionLocals,
                function: Some(0),
                ..
            })
        ));
        // A truncated module is not this check's business.
        let mut cut = component(&module_with(ModuleLimit::Functions, 3));
        cut.truncate(cut.len() - 2);
        assert!(check_module_limits(&cut).is_ok());
    }
}
