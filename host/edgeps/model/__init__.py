"""A trained model as users take it away: scaler, label names, exports, predictions.

``scaler`` (the feature scaler, combinable from parts), ``table`` (CSV/NPZ
files with text labels and headers), ``card`` (what travels with the
weights; a trained model predicts on raw features), ``writers`` (ONNX, C
header, JSON; one module each), ``files`` (models from checkpoints and
exports), ``scoring`` (accuracy, confusion matrix, R2 and MAE).
"""
