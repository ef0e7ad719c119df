"""The small models :mod:`mbdgen.warmup` steps with every registered method, one for each
kind of argument the integrators compiled once per installation take: dense and sparse
linear algebra, without user states, with explicit ones and with implicit ones.

Each file is self-contained (a generated module's staleness check hashes its model file
alone).
"""
