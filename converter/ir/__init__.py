"""The SSA IR: types, program structure, op registry, builder, verifier, text form, interpreter."""
