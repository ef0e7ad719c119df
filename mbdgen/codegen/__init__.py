"""Code generation: kernel ABI, CSE and printing, Jinja rendering, stamps."""
