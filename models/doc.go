// Package models is hap's model zoo: the paper's four models (VGG19,
// ViT, BERT-Base, BERT-MoE) plus GPT-2 and an MLP, each a Config that Build
// turns into an ir forward graph ending in a sum-reduced loss, and each with a
// "-tiny" variant small enough for CPU tests.
//
// models imports ir only.
package models
