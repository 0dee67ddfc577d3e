//! `trace_event!`: the kernel's `TRACE_EVENT` in Rust syntax.

/// Declare typed static tracepoints, with the five parts of the kernel's `TRACE_EVENT`:
///
/// ```
/// tp::trace_event! {
///     /// A request finished (doc comments become the event's docs).
///     pub myapp:request(id: u32, path: &str, latency_ns: u64) {   // name; proto + args
///         fields {                                                // TP_STRUCT__entry ...
///             id: u32,                                            // ... assigned from `id`
///             path: str = path,                                   // __data_loc char[]
///             latency_us: u64 = latency_ns / 1000,                // TP_fast_assign: any expr
///         }
///         printk("id=%u path=%s latency=%lluus", id, path, latency_us)   // TP_printk
///     }
/// }
///
/// trace_request(7, "/index.html", 12_000); // one relaxed load + branch while nothing listens
/// let h = register_trace_request(|id, path, ns| println!("{id} {path} {ns}"));
/// trace_request(8, "/", 1_000);
/// assert!(unregister_trace_request(h));
/// ```
///
/// For each event `NAME` it generates, with the event's visibility:
/// - `fn trace_NAME(args)`: fire the tracepoint;
/// - `fn register_trace_NAME(probe) -> tp::ProbeHandle` and
///   `fn unregister_trace_NAME(handle) -> bool`: typed probes (fns or closures taking the
///   arguments);
/// - `fn tracepoint_NAME() -> &'static tp::Site`: the site (format, docs, raw probes).
///
/// `stacks = true;` before `fields` makes the recorder write the firing thread's user stack
/// after each event (see [`crate::Site::set_stacks`]; `TP_STACKS` and [`crate::set_stacks`]
/// change it at run time).
///
/// Field types: see [`crate::field`]. A field without `= expr` takes the argument of the same
/// name. Assignments run only when something listens. The printk names fields; its
/// conversions are checked against the field types at compile time.
#[macro_export]
macro_rules! trace_event {
    ($(
        $(#[doc = $doc:literal])*
        $vis:vis $system:ident : $name:ident ( $($arg:ident : $aty:ty),* $(,)? ) {
            $(stacks = $stacks:literal ;)?
            fields { $( $field:ident : $fty:ty $(= $expr:expr)? ),* $(,)? }
            printk ( $fmt:literal $(, $parg:ident)* $(,)? ) $(;)?
        }
    )*) => {$(
        $crate::__private::paste! {
            #[doc(hidden)]
            #[allow(non_camel_case_types, dead_code)]
            #[derive(Clone, Copy)]
            #[repr(C)]
            struct [<__tp_rec_ $name>] {
                __common: $crate::__private::Common,
                $( $field: <$fty as $crate::__private::FieldType>::Storage, )*
            }

            #[doc(hidden)]
            #[allow(non_camel_case_types, dead_code)]
            struct [<__tp_vals_ $name>]<'__tp> {
                $( $field: <$fty as $crate::__private::FieldType>::Value<'__tp>, )*
                __tp_lt: $crate::__private::PhantomData<&'__tp ()>,
            }

            const _: () = {
                const MSG: $crate::__private::Msg = $crate::__private::check_printk(
                    $fmt,
                    &[$( (
                        ::core::stringify!($parg),
                        $crate::__private::print_kind_of(|r: &[<__tp_rec_ $name>]| &r.$parg),
                    ) ),*],
                );
                if !MSG.is_ok() {
                    ::core::panic!("{}", MSG.as_str());
                }
            };

            #[doc(hidden)]
            #[allow(non_upper_case_globals)]
            static [<__TP_META_ $name>]: $crate::__private::Meta = $crate::__private::Meta {
                system: ::core::stringify!($system),
                name: ::core::stringify!($name),
                docs: ::core::concat!($($doc, "\n",)*),
                fields: &[$( $crate::__private::FieldDesc {
                    name: ::core::stringify!($field),
                    c_type: <$fty as $crate::__private::FieldType>::C_TYPE,
                    layout: <$fty as $crate::__private::FieldType>::LAYOUT,
                    signed: <$fty as $crate::__private::FieldType>::SIGNED,
                    offset: ::core::mem::offset_of!([<__tp_rec_ $name>], $field),
                    size: ::core::mem::size_of::<<$fty as $crate::__private::FieldType>::Storage>(),
                } ),*],
                printk_fmt: $fmt,
                printk_args: &[$( ::core::stringify!($parg) ),*],
                fixed_size: ::core::mem::size_of::<[<__tp_rec_ $name>]>(),
                stacks: false $(|| $stacks)?,
                file: ::core::file!(),
                line: ::core::line!(),
            };

            /// The word `trace_NAME` tests; its low half is the SDT semaphore, so it sits
            /// in `.probes` as `<sys/sdt.h>` semaphores do.
            #[doc(hidden)]
            #[allow(non_upper_case_globals)]
            #[cfg_attr(
                all(target_arch = "x86_64", target_os = "linux"),
                unsafe(link_section = ".probes")
            )]
            static [<__TP_GATE_ $name>]: $crate::Gate = $crate::Gate::new();

            #[doc(hidden)]
            #[allow(non_upper_case_globals)]
            $vis static [<__tp_site_ $name>]: $crate::Site =
                $crate::Site::new(&[<__TP_META_ $name>], &[<__TP_GATE_ $name>]);

            #[$crate::__private::linkme::distributed_slice($crate::__private::TRACEPOINTS)]
            #[linkme(crate = $crate::__private::linkme)]
            #[allow(non_upper_case_globals)]
            static [<__TP_ENTRY_ $name>]: &'static $crate::Site = &[<__tp_site_ $name>];

            $(#[doc = $doc])*
            #[inline(always)]
            #[allow(dead_code)]
            $vis fn [<trace_ $name>]($($arg: $aty),*) {
                let __tp_gate = [<__TP_GATE_ $name>].load();
                if __tp_gate != 0 {
                    [<__tp_fire_ $name>](__tp_gate, $($arg),*);
                }
            }

            /// Something listens. When it is the recorder alone, the record goes straight
            /// into the thread's page with no call (so no registers to save); anything else
            /// is a tail call.
            #[cold]
            #[inline(never)]
            #[allow(dead_code, clippy::too_many_arguments)]
            fn [<__tp_fire_ $name>](__tp_gate: u32, $($arg: $aty),*) {
                if __tp_gate == $crate::__private::RECORD_ONLY_GATE
                    && [<__tp_record_fast_ $name>]($($arg),*)
                {
                    return;
                }
                // Where a user stack starts: this frame's record (see `stack::capture`), taken
                // here because a build without tail calls puts a frame of its own between.
                let __tp_fp = $crate::__private::frame_pointer().unwrap_or(0);
                [<__tp_fire_slow_ $name>](__tp_gate, __tp_fp, $($arg),*)
            }

            /// The recorder alone listens and the record has no dynamic fields (its length
            /// is known before the values are): reserve, then compute the values into the
            /// page. False, with nothing computed, when the full path must take the event.
            #[inline(always)]
            #[allow(dead_code, unused_variables, clippy::too_many_arguments)]
            fn [<__tp_record_fast_ $name>]($($arg: $aty),*) -> bool {
                const __TP_FIXED: usize = ::core::mem::size_of::<[<__tp_rec_ $name>]>();
                const __TP_DYNAMIC: bool =
                    false $( || <$fty as $crate::__private::FieldType>::LAYOUT.is_dynamic() )*;
                if __TP_DYNAMIC {
                    return false;
                }
                $crate::__private::record_fast(
                    &[<__tp_site_ $name>],
                    __TP_FIXED,
                    move |__tp_w: &mut $crate::__private::RecordWriter, __common| {
                        let __tp_vals = [<__tp_vals_ $name>] {
                            $( $field: $crate::__tp_value!($field $($expr)?), )*
                            __tp_lt: $crate::__private::PhantomData,
                        };
                        let mut __tp_off = __TP_FIXED;
                        __tp_w.fixed([<__tp_rec_ $name>] {
                            __common,
                            $( $field: <$fty as $crate::__private::FieldType>::storage(
                                &__tp_vals.$field, &mut __tp_off), )*
                        });
                    },
                )
            }

            /// Something listens: an external tracer at the SDT probe point (semaphore
            /// set), or probes, the recorder or sinks in the process (state).
            #[cold]
            #[inline(never)]
            #[allow(dead_code, clippy::too_many_arguments)]
            fn [<__tp_fire_slow_ $name>](__tp_gate: u32, __tp_fp: usize, $($arg: $aty),*) {
                if __tp_gate & $crate::__private::SEMAPHORE != 0 {
                    $crate::__tp_sdt_probe!(
                        $system, $name, [<__tp_fire_slow_ $name>], [<__TP_GATE_ $name>],
                        $($arg : $aty),*
                    );
                }
                let __tp_state = $crate::Gate::state_of(__tp_gate);
                if __tp_state == 0 {
                    return;
                }
                if __tp_state == $crate::__private::RECORD {
                    [<__tp_build_ $name>](
                        $crate::__private::RecordOnly(&[<__tp_site_ $name>]),
                        $($arg),*
                    );
                } else {
                    [<__tp_fire_all_ $name>](__tp_state, __tp_fp, $($arg),*);
                }
            }

            /// Probes or sinks listen: the arguments go into a tuple they can read.
            #[cold]
            #[inline(never)]
            #[allow(dead_code, clippy::too_many_arguments)]
            fn [<__tp_fire_all_ $name>](__tp_state: u8, __tp_fp: usize, $($arg: $aty),*) {
                let __tp_args = ($($arg,)*);
                [<__tp_build_ $name>](
                    $crate::__private::Everything {
                        site: &[<__tp_site_ $name>],
                        state: __tp_state,
                        args: &__tp_args as *const _ as *const (),
                        fp: __tp_fp,
                    },
                    $($arg),*
                );
            }

            /// Evaluate the field assignments once and emit the record through `__tp_to`.
            #[inline(always)]
            #[allow(dead_code, unused_variables, clippy::too_many_arguments)]
            fn [<__tp_build_ $name>]<E: $crate::__private::Emit>(__tp_to: E, $($arg: $aty),*) {
                $( $crate::__private::tracepoint_arguments_must_be_copy::<$aty>(); )*
                let __tp_vals = [<__tp_vals_ $name>] {
                    $( $field: $crate::__tp_value!($field $($expr)?), )*
                    __tp_lt: $crate::__private::PhantomData,
                };
                const __TP_FIXED: usize = ::core::mem::size_of::<[<__tp_rec_ $name>]>();
                let __tp_len = __TP_FIXED
                    $( + <$fty as $crate::__private::FieldType>::dyn_len(&__tp_vals.$field) )*;
                __tp_to.emit(
                    __tp_len,
                    // `move`: the values travel in registers instead of being read back
                    // from the stack.
                    move |__tp_w: &mut $crate::__private::RecordWriter, __common| {
                        let mut __tp_off = __TP_FIXED;
                        __tp_w.fixed([<__tp_rec_ $name>] {
                            __common,
                            $( $field: <$fty as $crate::__private::FieldType>::storage(
                                &__tp_vals.$field, &mut __tp_off), )*
                        });
                        let mut __tp_at = __TP_FIXED;
                        $( __tp_w.dynamic::<$fty>(&mut __tp_at, &__tp_vals.$field); )*
                    },
                );
            }

            /// Register a typed probe: called with the arguments of every
            /// `trace_` call while registered. Keep the handle to unregister it.
            #[allow(dead_code)]
            $vis fn [<register_trace_ $name>](
                probe: impl Fn($($aty),*) + Send + Sync + 'static,
            ) -> $crate::ProbeHandle {
                // SAFETY: the site hands typed probes a pointer to `fire`'s argument tuple,
                // whose type is exactly `($($aty,)*)`, and the tuple is Copy.
                unsafe {
                    [<__tp_site_ $name>].register_typed($crate::__private::TypedProbe::new(
                        move |__tp_p: *const ()| {
                            let ($($arg,)*) = *(__tp_p as *const ($($aty,)*));
                            probe($($arg),*)
                        },
                    ))
                }
            }

            /// Unregister a probe; when this returns, no thread is running it.
            #[allow(dead_code)]
            $vis fn [<unregister_trace_ $name>](handle: $crate::ProbeHandle) -> bool {
                [<__tp_site_ $name>].unregister(handle)
            }

            /// The tracepoint's site: its format, docs and raw probes.
            #[allow(dead_code)]
            $vis fn [<tracepoint_ $name>]() -> &'static $crate::Site {
                &[<__tp_site_ $name>]
            }
        }
    )*};
}

#[doc(hidden)]
#[macro_export]
macro_rules! __tp_value {
    ($field:ident) => {
        $field
    };
    ($field:ident $e:expr) => {
        $e
    };
}
