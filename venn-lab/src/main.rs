//! `venn-lab`: local experiments (live, on the virtual clock), comparisons over seeds,
//! load tests and hostile clients. The command line lives in the library
//! (`venn_lab::commands`), so a program with its own FL tasks gets all of it:
//! `venn-lab/examples/custom_lab.rs`.

fn main() -> anyhow::Result<()> {
    venn_lab::commands::main_with(venn_lab::commands::Lab::default())
}
