"""The recurrent-tensor language: context, symbols, tensors, piecewise definitions."""
