//! Enums of wire codes: a command's or an error's number on the wire, one enum per owner
//! (the core's and each machine's, each in its own range).

/// Declares an enum of wire codes (`Name = number`, each with its doc) and what every such
/// enum has: `ALL`, its variants in declaration order (so a new one cannot be left out of
/// the tables that list them), and `from_code`, the variant of a number on the wire.
/// `command` enums are a [`crate::wire::Code`]; `error` enums turn `Into<u32>` (what
/// [`crate::machines::handle::Reject::new`] takes), and each of their codes names its
/// reason and gRPC status (`Name = number => "REASON" Status`), listed in `GRPC` for the
/// gRPC service's table.
macro_rules! codes {
    (
        command;
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $value:literal, )*
        }
    ) => {
        $crate::wire::codes::codes!(@enum $(#[$meta])* $vis $name { $( $(#[$vmeta])* $variant = $value, )* });

        impl $crate::wire::Code for $name {
            fn code(self) -> u32 {
                self as u32
            }
        }
    };
    (
        error;
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $value:literal => $reason:literal $status:ident, )*
        }
    ) => {
        $crate::wire::codes::codes!(@enum $(#[$meta])* $vis $name { $( $(#[$vmeta])* $variant = $value, )* });

        impl $name {
            /// Each code with its reason (what a gRPC status carries) and the gRPC status
            /// code it is answered with.
            pub const GRPC: [(u32, &'static str, $crate::wire::rpc::GrpcCode); [$(stringify!($variant)),*].len()] =
                [$( ($value, $reason, $crate::wire::rpc::GrpcCode::$status) ),*];
        }

        impl From<$name> for u32 {
            fn from(code: $name) -> u32 {
                code as u32
            }
        }
    };
    (
        @enum $(#[$meta:meta])* $vis:vis $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $value:literal, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(u32)]
        $vis enum $name {
            $( $(#[$vmeta])* $variant = $value, )*
        }

        impl $name {
            pub const ALL: [$name; [$(stringify!($variant)),*].len()] = [$($name::$variant),*];

            pub fn from_code(code: u32) -> Option<$name> {
                $name::ALL.into_iter().find(|c| *c as u32 == code)
            }
        }
    };
}

pub(crate) use codes;

#[cfg(test)]
mod tests {
    codes! {
        error;
        /// Two codes, for the test.
        pub enum Two {
            /// The first.
            First = 7 => "FIRST" NotFound,
            /// The second.
            Second = 9 => "SECOND" Internal,
        }
    }

    #[test]
    fn all_lists_every_code_in_order_and_each_number_finds_its_own() {
        assert_eq!(Two::ALL, [Two::First, Two::Second]);
        assert_eq!(Two::from_code(9), Some(Two::Second));
        assert_eq!(Two::from_code(8), None);
        assert_eq!(u32::from(Two::First), 7);
        assert_eq!(
            Two::GRPC[1],
            (9, "SECOND", crate::wire::rpc::GrpcCode::Internal)
        );
    }
}
