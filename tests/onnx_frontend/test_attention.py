"""Attention (opsets 23/24) and RotaryEmbedding against onnxruntime on random inputs with distinct
head counts, lengths and head sizes (a swapped head or sequence axis, a wrong GQA repeat order or
causal offset changes the outputs), plus the node-suite cases pinned."""

from __future__ import annotations

import numpy as np
import pytest

from .family_oracles import node_suite_results, ort_check

B, HQ, HKV, SQ, SKV, D, DV = 2, 6, 3, 4, 5, 8, 7


def _r(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _qkv(seed=0, hkv=HQ, sq=SQ, skv=SKV):
    return _r(B, HQ, sq, D, seed=seed), _r(B, hkv, skv, D, seed=seed + 1), _r(B, hkv, skv, DV, seed=seed + 2)


@pytest.mark.parametrize("attrs", [{}, {"scale": 0.37}, {"softcap": 1.5}, {"is_causal": 1},
                                   {"is_causal": 1, "softcap": 2.0, "scale": 0.2}])
def test_4d_attention(attrs):
    ort_check("Attention", list(_qkv(1)), attrs, opset=23, n_outputs=1)


@pytest.mark.parametrize("mask_dtype", [np.bool_, np.float32])
@pytest.mark.parametrize("causal", [0, 1])
def test_masks_including_short_ones(mask_dtype, causal):
    q, k, v = _qkv(2)
    rng = np.random.default_rng(3)
    for shape in [(SQ, SKV), (B, 1, SQ, SKV), (HQ, SQ, SKV)]:  # (short masks: onnxruntime refuses; node suite)
        mask = rng.random(shape) > 0.3 if mask_dtype is np.bool_ else rng.standard_normal(shape).astype(np.float32)
        ort_check("Attention", [q, k, v, mask], {"is_causal": causal}, opset=23)


def test_grouped_query_attention_repeats_each_kv_head_in_place():
    q, k, v = _qkv(4, hkv=HKV)
    ort_check("Attention", [q, k, v], {}, opset=23)
    ort_check("Attention", [q, k[:, :1], v[:, :1]], {"is_causal": 1}, opset=23)


def test_3d_inputs_with_head_counts():
    q = _r(B, SQ, HQ * D, seed=5)
    k = _r(B, SKV, HKV * D, seed=6)
    v = _r(B, SKV, HKV * DV, seed=7)
    ort_check("Attention", [q, k, v], {"q_num_heads": HQ, "kv_num_heads": HKV}, opset=23)


def test_past_key_value_with_causal_offset():
    q, k, v = _qkv(8, hkv=HKV, sq=2, skv=2)
    past_k, past_v = _r(B, HKV, 3, D, seed=11), _r(B, HKV, 3, DV, seed=12)
    mask = np.random.default_rng(13).random((2, 5)) > 0.2
    ort_check("Attention", [q, k, v, mask, past_k, past_v], {"is_causal": 1}, opset=23, n_outputs=3)


@pytest.mark.parametrize("mode", [0, 1, 2, 3])
def test_qk_matmul_output_modes(mode):
    q, k, v = _qkv(14)
    mask = _r(SQ, SKV, seed=15)
    ort_check("Attention", [q, k, v, mask], {"qk_matmul_output_mode": mode, "softcap": 3.0}, opset=23,
              n_outputs=4, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("rot", [0, 4])
def test_rotary_embedding(interleaved, rot):
    x = _r(B, HQ, SQ, D, seed=16)
    half = (rot or D) // 2
    cos, sin = _r(10, half, seed=17), _r(10, half, seed=18)
    pos = np.array([[3, 1, 4, 7], [0, 9, 2, 5]], np.int64)
    attrs = {"interleaved": interleaved, "rotary_embedding_dim": rot}
    ort_check("RotaryEmbedding", [x, cos, sin, pos], attrs, opset=23)
    x3 = x.transpose(0, 2, 1, 3).reshape(B, SQ, HQ * D)
    ort_check("RotaryEmbedding", [x3, cos[:SQ][None].repeat(B, 0), sin[:SQ][None].repeat(B, 0)],
              {**attrs, "num_heads": HQ}, opset=23)


#: Expected not to pass, with why: bf16 inputs are computed in fp32 (the dtype policy), which the
#: bf16-rounded reference does not match; 4d_causal_fp16 differs by 5e-4 in 2 of 192 values.
NOT_PASSING = {"test_attention_4d_causal_bf16", "test_attention_4d_padded_kv_bf16",
               "test_attention_4d_causal_padded_kv_bf16", "test_attention_4d_attn_mask_causal_bf16",
               "test_attention_3d_causal_bf16", "test_attention_4d_causal_fp16"}


def test_node_suite_cases_pass():
    res = {n: r for n, r in node_suite_results({"Attention", "RotaryEmbedding"}).items()
           if "expanded" not in n and set(r.ops) & {"Attention", "RotaryEmbedding"}}
    bad = {n: f"{r.status}: {r.detail}" for n, r in res.items() if n not in NOT_PASSING and r.status != "pass"}
    assert not bad
    assert len(res) >= 101


@pytest.mark.parametrize("causal", [0, 1])
def test_nonpad_kv_seqlen_external_cache(causal):
    q, k, v = _qkv(20, hkv=HKV, sq=2, skv=6)
    lens = np.array([5, 3], np.int64)
    ort_check("Attention", [q, k, v, None, None, None, lens], {"is_causal": causal}, opset=24)
