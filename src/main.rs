//! The `kiwi` binary: everything lives in the library; see `kiwi::app`.

fn main() -> std::process::ExitCode {
    kiwi::app::main()
}
