//! nebcli's sequence commands.
