"""Analysis of the integration methods, apart from any model (numpy only).

:mod:`mbdgen.analysis.stability` holds the linear stability analyses of the Adams
family (Wu, Chiou & Lin 2000) and of the constraint treatments compared by Welch,
Hong, Trapp & Choi (2007), computed from the coefficient tables of
:mod:`mbdgen.methods`.
"""
