//! What `sandpiper:policy@0.2.0` added and `0.3.0` kept in the same shape,
//! written once as macros both version modules expand over their own
//! generated types (as `shared_conversions!` does for what every version
//! has): the hardware enums, string tables, the VM's hardware, reasons
//! with figures, `applies-to`, and the hardware `inventory` functions
//! whose shape did not change.

/// The conversions 0.2.0 and 0.3.0 share. The arguments are the
/// version's extra `request-property` cases, as match arms from `W` (the
/// generated type) to `M` (the model's).
macro_rules! conversions_since_0_2 {
    ($($property:tt)*) => {
        // Enums a unit sends (arguments of `inventory` functions).
        same_enum!(types::HostMetric => model::HostMetric {
            CpuSockets, CpuCores, CpuThreads, CpuUsagePercent, CpuPendingPercent,
            CpuOverloadedMinutes, VcpusUsed, VcpusPending, MemoryTotalMib, MemoryFreeMib,
            MemoryPendingMib, MemoryCommittedMib, MemoryReservedMib, SwapTotalMib, SwapFreeMib,
            VmCount, VmPendingCount, DiskTotalGib, DiskFreeGib, IoOps, BuildFailures, HaScore,
            HypervisorVersion, TscFrequencyHz,
        });
        same_enum!(types::HostFlag => model::HostFlag { Spm, HostedEngine, Isolated, TscScaling });
        same_enum!(types::HostText => model::HostText { Id, Name, Address, Zone, CpuModel });
        same_enum!(types::HostLabelKind => model::HostLabels {
            Networks, Capabilities, Aggregates, AggregateMetadata, Instances, CpuFlags,
            EmulatedMachines, ClusterLevels,
        });
        same_enum!(types::CellMetric => model::CellMetric {
            MemoryTotalMib, MemoryFreeMib, Cpus, DedicatedCpus, PinnedCpus, SharedVcpusUsed,
        });
        same_enum!(types::PcpuFlag => model::PcpuFlag { Dedicated, Pinned });

        // Enums the host sends.
        same_enum!(model::NumaTune => types::NumaTune { Strict, Interleave, Preferred });
        same_enum!(model::CpuPolicy => types::CpuPolicy { Shared, Dedicated, Mixed });
        same_enum!(model::ThreadPolicy => types::ThreadPolicy { Prefer, Isolate, Require });
        same_enum!(model::EmulatorThreads => types::EmulatorThreads { Share, Isolate });
        same_enum!(model::PciNumaPolicy => types::PciNumaPolicy {
            Legacy, Required, Preferred, Socket,
        });

        /// A table of strings as one UTF-8 text plus offsets (see `types.strings`).
        fn strings(table: &[String]) -> types::Strings {
            let mut text = Vec::with_capacity(table.iter().map(String::len).sum());
            let mut offsets = Vec::with_capacity(table.len() + 1);
            offsets.push(0);
            for s in table {
                text.extend_from_slice(s.as_bytes());
                offsets.push($crate::sandbox::bindings::count(text.len()));
            }
            types::Strings { text, offsets }
        }

        fn interned(column: &model::Interned) -> types::Interned {
            // The model keeps the values as this very table.
            types::Interned {
                values: types::Strings {
                    text: column.text().as_bytes().to_vec(),
                    offsets: column.offsets().to_vec(),
                },
                indices: column.indices.clone(),
            }
        }

        fn labels(column: &model::Labels) -> types::Labels {
            types::Labels {
                strings: strings(&column.strings),
                offsets: column.offsets.clone(),
                keys: column.keys.clone(),
                values: column.values.clone(),
            }
        }

        impl From<model::PageSize> for types::PageSize {
            fn from(size: model::PageSize) -> Self {
                match size {
                    model::PageSize::Unspecified => types::PageSize::Unspecified,
                    model::PageSize::Small => types::PageSize::Small,
                    model::PageSize::Large => types::PageSize::Large,
                    model::PageSize::Any => types::PageSize::Any,
                    model::PageSize::Kib(kib) => types::PageSize::Kib(kib),
                }
            }
        }

        impl From<&model::VmHardware> for types::VmHardware {
            fn from(hw: &model::VmHardware) -> Self {
                types::VmHardware {
                    numa_cells: hw
                        .numa_cells
                        .iter()
                        .map(|cell| types::VmNumaCell {
                            shared_vcpus: cell.shared_vcpus.clone(),
                            dedicated_vcpus: cell.dedicated_vcpus.clone(),
                            memory_mib: cell.memory_mib,
                            host_nodes: cell.host_nodes.clone(),
                        })
                        .collect(),
                    numa_tune: hw.numa_tune.into(),
                    cpu_policy: hw.cpu_policy.into(),
                    thread_policy: hw.thread_policy.into(),
                    emulator_threads: hw.emulator_threads.into(),
                    page_size: hw.page_size.into(),
                    cpu_model: hw.cpu_model.clone(),
                    required_cpu_flags: hw.required_cpu_flags.clone(),
                    forbidden_cpu_flags: hw.forbidden_cpu_flags.clone(),
                    pci_requests: hw
                        .pci_requests
                        .iter()
                        .map(|request| types::PciRequest {
                            alias: request.alias.clone(),
                            count: request.count,
                            specs: request.specs.iter().map(|spec| key_values(spec)).collect(),
                            numa_policy: request.numa_policy.into(),
                        })
                        .collect(),
                    mdev_types: hw.mdev_types.clone(),
                    compatibility_version: hw.compatibility_version.clone(),
                    machine_type: hw.machine_type.clone(),
                    keeps_tsc_frequency: hw.keeps_tsc_frequency,
                }
            }
        }

        impl From<&model::Vm> for types::Vm {
            fn from(vm: &model::Vm) -> Self {
                lower_vm!(vm, { hardware: (&vm.hardware).into() })
            }
        }

        impl From<types::Rejection> for model::Rejection {
            fn from(rejection: types::Rejection) -> Self {
                model::Rejection {
                    reason: rejection.reason,
                    hosts: rejection.hosts,
                    figures: rejection.figures,
                }
            }
        }

        impl From<types::RequestProperty> for model::RequestProperty {
            fn from(property: types::RequestProperty) -> Self {
                use model::RequestProperty as M;
                use types::RequestProperty as W;
                match property {
                    W::CurrentHost => M::CurrentHost,
                    W::DedicatedHosts => M::DedicatedHosts,
                    W::Groups => M::Groups,
                    W::Networks => M::Networks,
                    W::HighlyAvailable => M::HighlyAvailable,
                    W::HostedEngine => M::HostedEngine,
                    W::Hint(key) => M::Hint(key),
                    W::ExtraSpec(prefix) => M::ExtraSpec(prefix),
                    W::ImageProperty(key) => M::ImageProperty(key),
                    W::NumaTopology => M::NumaTopology,
                    W::CpuPinning => M::CpuPinning,
                    W::PageSize => M::PageSize,
                    W::CpuModel => M::CpuModel,
                    W::CpuFlags => M::CpuFlags,
                    W::PciDevices => M::PciDevices,
                    W::MdevTypes => M::MdevTypes,
                    W::CompatibilityVersion => M::CompatibilityVersion,
                    W::MachineType => M::MachineType,
                    W::TscFrequency => M::TscFrequency,
                    $($property)*
                }
            }
        }

        fn unit_info(info: types::UnitInfo) -> model::UnitInfo {
            model::UnitInfo {
                name: info.name,
                description: info.description,
                params: param_specs(info.params),
                score_order: info.score_order.into(),
                applies_to: match info.applies_to {
                    types::AppliesTo::EveryRequest => model::AppliesTo::EveryRequest,
                    types::AppliesTo::RequestsWith(properties) => model::AppliesTo::RequestsWith(
                        properties.into_iter().map(Into::into).collect(),
                    ),
                },
                per_host: info.per_host,
            }
        }
    };
}
pub(crate) use conversions_since_0_2;

/// The hardware `inventory` functions 0.2.0 and 0.3.0 share, as items of
/// the version's `inventory::Host` impl. Every hardware column is noted as
/// read (`ColumnsRead::hardware`).
macro_rules! inventory_since_0_2 {
    () => {
        fn numa_cells(&mut self) -> types::NumaTopology {
            self.read.hardware();
            let numa = self.inventory.numa_topology();
            types::NumaTopology {
                offsets: numa.offsets.clone(),
                node_ids: numa.node_ids.clone(),
                sockets: numa.sockets.clone(),
            }
        }

        fn numa_cell_metrics(&mut self, metric: types::CellMetric) -> Vec<f64> {
            self.read.hardware();
            self.inventory.cell_metric(metric.into()).to_vec()
        }

        fn numa_cell_cpus(&mut self) -> types::CellCpus {
            self.read.hardware();
            let cpus = self.inventory.cell_cpus();
            types::CellCpus {
                offsets: cpus.offsets.clone(),
                cpus: cpus.cpus.clone(),
                cores: cpus.cores.clone(),
            }
        }

        fn numa_pcpu_flags(&mut self, flag: types::PcpuFlag) -> Vec<u8> {
            self.read.hardware();
            $crate::sandbox::bindings::flag_bytes(self.inventory.pcpu_flag(flag.into()))
        }

        fn numa_cell_pages(&mut self) -> types::CellPages {
            self.read.hardware();
            let pages = self.inventory.cell_pages();
            types::CellPages {
                offsets: pages.offsets.clone(),
                size_kib: pages.size_kib.clone(),
                total: pages.total.clone(),
                free: pages.free.clone(),
            }
        }

        fn numa_cell_distances(&mut self) -> types::CellDistances {
            self.read.hardware();
            let distances = self.inventory.cell_distances();
            types::CellDistances {
                offsets: distances.offsets.clone(),
                values: distances.values.clone(),
            }
        }

        fn device_pool_labels(&mut self) -> types::Labels {
            self.read.hardware();
            labels(self.inventory.pci_pool_labels())
        }

        fn mdev_types(&mut self) -> types::MdevOffers {
            self.read.hardware();
            let offers = self.inventory.mdev_offers();
            types::MdevOffers {
                offsets: offers.offsets.clone(),
                strings: strings(&offers.strings),
                names: offers.names.clone(),
                free: offers.free.clone(),
                pools: offers.pools.clone(),
            }
        }
    };
}
pub(crate) use inventory_since_0_2;
