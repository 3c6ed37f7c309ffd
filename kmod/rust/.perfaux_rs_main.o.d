/work/main/kmod/rust/.perfaux_rs_main.o.d: /work/main/target/kmod-rust/linux-a495ca99327ef247/.clippy.toml /work/main/kmod/rust/perfaux_rs_main.rs /work/main/kmod/rust/bindings.rs /work/main/kmod/rust/buffer.rs /work/main/kmod/rust/cpu.rs /work/main/kmod/rust/params.rs /work/main/kmod/rust/percpu.rs /work/main/kmod/rust/perf/mod.rs /work/main/kmod/rust/perf/aux.rs /work/main/kmod/rust/perf/event.rs /work/main/kmod/rust/perf/pmu.rs /work/main/kmod/rust/phys.rs /work/main/kmod/rust/pmu.rs /work/main/kmod/rust/step.rs /work/main/kmod/rust/sysfs.rs /work/main/kmod/rust/task/mod.rs /work/main/kmod/rust/task/hooks.rs /work/main/kmod/rust/warn.rs /work/main/kmod/rust/perf_bindings.rs ./rust/libcore.rmeta ./rust/libkernel.rmeta ./rust/libffi.rmeta ./rust/libcompiler_builtins.rmeta ./rust/libmacros.so ./rust/libbindings.rmeta ./rust/libuapi.rmeta ./rust/libbuild_error.rmeta /work/main/kmod/rust/libperfaux.rmeta /work/main/kmod/rust/libstatic_assertions.rmeta

/work/main/kmod/rust/perfaux_rs_main.o: /work/main/target/kmod-rust/linux-a495ca99327ef247/.clippy.toml /work/main/kmod/rust/perfaux_rs_main.rs /work/main/kmod/rust/bindings.rs /work/main/kmod/rust/buffer.rs /work/main/kmod/rust/cpu.rs /work/main/kmod/rust/params.rs /work/main/kmod/rust/percpu.rs /work/main/kmod/rust/perf/mod.rs /work/main/kmod/rust/perf/aux.rs /work/main/kmod/rust/perf/event.rs /work/main/kmod/rust/perf/pmu.rs /work/main/kmod/rust/phys.rs /work/main/kmod/rust/pmu.rs /work/main/kmod/rust/step.rs /work/main/kmod/rust/sysfs.rs /work/main/kmod/rust/task/mod.rs /work/main/kmod/rust/task/hooks.rs /work/main/kmod/rust/warn.rs /work/main/kmod/rust/perf_bindings.rs ./rust/libcore.rmeta ./rust/libkernel.rmeta ./rust/libffi.rmeta ./rust/libcompiler_builtins.rmeta ./rust/libmacros.so ./rust/libbindings.rmeta ./rust/libuapi.rmeta ./rust/libbuild_error.rmeta /work/main/kmod/rust/libperfaux.rmeta /work/main/kmod/rust/libstatic_assertions.rmeta

/work/main/target/kmod-rust/linux-a495ca99327ef247/.clippy.toml:
/work/main/kmod/rust/perfaux_rs_main.rs:
/work/main/kmod/rust/bindings.rs:
/work/main/kmod/rust/buffer.rs:
/work/main/kmod/rust/cpu.rs:
/work/main/kmod/rust/params.rs:
/work/main/kmod/rust/percpu.rs:
/work/main/kmod/rust/perf/mod.rs:
/work/main/kmod/rust/perf/aux.rs:
/work/main/kmod/rust/perf/event.rs:
/work/main/kmod/rust/perf/pmu.rs:
/work/main/kmod/rust/phys.rs:
/work/main/kmod/rust/pmu.rs:
/work/main/kmod/rust/step.rs:
/work/main/kmod/rust/sysfs.rs:
/work/main/kmod/rust/task/mod.rs:
/work/main/kmod/rust/task/hooks.rs:
/work/main/kmod/rust/warn.rs:
/work/main/kmod/rust/perf_bindings.rs:
./rust/libcore.rmeta:
./rust/libkernel.rmeta:
./rust/libffi.rmeta:
./rust/libcompiler_builtins.rmeta:
./rust/libmacros.so:
./rust/libbindings.rmeta:
./rust/libuapi.rmeta:
./rust/libbuild_error.rmeta:
/work/main/kmod/rust/libperfaux.rmeta:
/work/main/kmod/rust/libstatic_assertions.rmeta:

# env-dep:CLIPPY_ARGS
# env-dep:CLIPPY_CONF_DIR=.
