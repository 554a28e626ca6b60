"""Program transformations: restaging (copy) and reverse mode by CPS."""
