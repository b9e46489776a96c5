"""A trained model as users take it away: scaler, label names, exports, predictions.

``scaler`` (the feature scaler, combinable from parts), ``table`` (CSV/NPZ
files with text labels and headers), ``card`` (what travels with the
weights), ``writers`` (ONNX, C header, JSON), ``scoring`` (accuracy,
confusion matrix, R2).
"""
