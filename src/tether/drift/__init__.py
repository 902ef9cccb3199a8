"""Drift: detect, regenerate, classify, gate, publish. (Detectors and the gate come next.)"""
