"""Build upstream LingBot-Map (GCTStream, SDPA backend) at any size from one of
our JSON model configs, with fixed random weights.

Upstream hard-codes several sizes (ViT-L encoder, 16 heads in the 3D RoPE,
output layers [4, 11, 17, 23], a 256-wide DPT head). For small test models we
build the same upstream classes with other sizes and swap them in; every
module that runs is upstream's own code. Only the wiring is ours.

Used by make_model_fixtures.py (CI parity fixtures) and by the GPU-machine
scripts that compare the official architecture.
"""

import json
import math
import types
from functools import partial

import torch

from lingbot_map.aggregator.stream import AggregatorStream
from lingbot_map.heads.camera_head import CameraCausalHead
from lingbot_map.heads.dpt_head import DPTHead
from lingbot_map.layers.attention import Attention, SDPAAttention
from lingbot_map.layers.block import Block
from lingbot_map.layers.rope import WanRotaryPosEmbed, apply_rotary_emb
from lingbot_map.layers.vision_transformer import DinoVisionTransformer
from lingbot_map.models.gct_stream import GCTStream

# The official architecture; a config file overrides any of these keys.
OFFICIAL = {
    "img_size": 518,
    "patch_size": 14,
    "embed_dim": 1024,
    "depth": 24,
    "num_heads": 16,
    "mlp_ratio": 4.0,
    "num_register_tokens": 4,
    "qk_norm": True,
    "rope_freq": 100,
    "enable_3d_rope": True,
    "max_frame_num": 1024,
    "kv_cache_sliding_window": 64,
    "kv_cache_scale_frames": 8,
    "kv_cache_cross_frame_special": True,
    "kv_cache_include_scale_frames": True,
    "kv_cache_camera_only": False,
    "camera_num_iterations": 4,
    "num_scale_frames": 8,
    "encoder": {"embed_dim": 1024, "depth": 24, "num_heads": 16, "mlp_ratio": 4.0, "num_register_tokens": 4},
    "aggregator_output_layers": [4, 11, 17, 23],
    "rope3d_fhw_dim": [20, 22, 22],
    "rope3d_theta": 10000.0,
    "camera_head": {"dim": 2048, "trunk_depth": 4, "num_heads": 16, "mlp_ratio": 4.0},
    "depth_head": {"features": 256, "out_channels": [256, 512, 1024, 1024]},
}


def resolve_config(cfg):
    out = json.loads(json.dumps(OFFICIAL))
    for k, v in cfg.items():
        if isinstance(v, dict):
            out[k].update(v)
        else:
            out[k] = v
    return out


def _honour_skip_append(attn, x, pos=None, num_patches=None, num_special=None, num_frames=None,
                        enable_3d_rope=False, kv_cache=None, global_idx=0, num_frame_per_block=1,
                        num_frame_for_scale=-1, num_register_tokens=4, _orig=None):
    """SDPAAttention.forward, except that a non-keyframe (kv_cache['_skip_append'])
    attends to the stored cache plus its own tokens and stores nothing.

    Upstream's SDPA path ignores the flag and stores every frame; its paged
    (FlashInfer) path and its camera head honour it. DESIGN.md: follow the
    paged semantics.
    """
    if kv_cache is None or not kv_cache.get("_skip_append", False):
        return _orig(x, pos=pos, num_patches=num_patches, num_special=num_special,
                     num_frames=num_frames, enable_3d_rope=enable_3d_rope, kv_cache=kv_cache,
                     global_idx=global_idx, num_frame_per_block=num_frame_per_block,
                     num_frame_for_scale=num_frame_for_scale,
                     num_register_tokens=num_register_tokens)
    B, N, C = x.shape
    qkv = attn.qkv(x).reshape(B, N, 3, attn.num_heads, attn.head_dim).permute(2, 0, 3, 1, 4)
    q, k, v = qkv.unbind(0)
    q, k = attn.q_norm(q), attn.k_norm(k)
    if attn.rope is not None and not enable_3d_rope:
        q, k = attn.rope(q, pos), attn.rope(k, pos)
    elif attn.rope is not None:
        q, k = apply_rotary_emb(q, pos), apply_rotary_emb(k, pos)
    parts_k, parts_v = [], []
    sk = kv_cache.get(f"k_{global_idx}_special")
    if sk is not None:
        sv = kv_cache[f"v_{global_idx}_special"]
        parts_k.append(sk.reshape(sk.shape[0], sk.shape[1], -1, sk.shape[-1]))
        parts_v.append(sv.reshape(sv.shape[0], sv.shape[1], -1, sv.shape[-1]))
    ck = kv_cache.get(f"k_{global_idx}")
    if ck is not None:
        cv = kv_cache[f"v_{global_idx}"]
        parts_k.append(ck.reshape(ck.shape[0], ck.shape[1], -1, ck.shape[-1]))
        parts_v.append(cv.reshape(cv.shape[0], cv.shape[1], -1, cv.shape[-1]))
    parts_k.append(k)
    parts_v.append(v)
    out = torch.nn.functional.scaled_dot_product_attention(q, torch.cat(parts_k, 2), torch.cat(parts_v, 2))
    out = out.transpose(1, 2).reshape(B, N, attn.num_heads * attn.head_dim)
    return attn.proj(out)


def build_model(cfg, kv_flags=None):
    """Upstream GCTStream (SDPA backend) with the sizes of `cfg` (resolved)."""
    c = resolve_config(cfg)
    kv = {
        "kv_cache_sliding_window": c["kv_cache_sliding_window"],
        "kv_cache_scale_frames": c["kv_cache_scale_frames"],
        "kv_cache_cross_frame_special": c["kv_cache_cross_frame_special"],
        "kv_cache_include_scale_frames": c["kv_cache_include_scale_frames"],
        "kv_cache_camera_only": c["kv_cache_camera_only"],
    }
    if kv_flags:
        kv.update(kv_flags)
    E = c["embed_dim"]
    enc = c["encoder"]
    assert enc["embed_dim"] == E, "encoder and aggregator widths must match"

    # A GCTStream shell with a conv stem (avoids building a ViT-L we would discard).
    model = GCTStream(
        img_size=c["img_size"], patch_size=c["patch_size"], embed_dim=E, patch_embed="conv",
        enable_3d_rope=False, max_frame_num=c["max_frame_num"], use_sdpa=True,
        camera_num_iterations=c["camera_num_iterations"], num_frame_for_scale=c["num_scale_frames"],
        use_gradient_checkpoint=False, **kv)

    agg = AggregatorStream(
        img_size=c["img_size"], patch_size=c["patch_size"], embed_dim=E, depth=c["depth"],
        num_heads=c["num_heads"], mlp_ratio=c["mlp_ratio"], num_register_tokens=c["num_register_tokens"],
        qk_norm=c["qk_norm"], patch_embed="conv", rope_freq=c["rope_freq"], enable_3d_rope=False,
        max_frame_num=c["max_frame_num"], num_frame_for_scale=c["num_scale_frames"], use_sdpa=True,
        use_gradient_checkpoint=False, **kv)
    # DINOv2 encoder with registers, as upstream's vit_large() builds it, at our size.
    agg.patch_embed = DinoVisionTransformer(
        img_size=c["img_size"], patch_size=c["patch_size"], embed_dim=E, depth=enc["depth"],
        num_heads=enc["num_heads"], mlp_ratio=enc["mlp_ratio"],
        block_fn=partial(Block, attn_class=Attention), num_register_tokens=enc["num_register_tokens"],
        interpolate_antialias=True, interpolate_offset=0.0, block_chunks=0, init_values=1.0)
    if c["enable_3d_rope"]:
        agg.enable_3d_rope = True
        agg.rope3d = WanRotaryPosEmbed(
            attention_head_dim=E // c["num_heads"], patch_size=(1, c["patch_size"], c["patch_size"]),
            max_seq_len=c["max_frame_num"], theta=c["rope3d_theta"], fhw_dim=list(c["rope3d_fhw_dim"]))
    # Non-keyframes must not be stored (see _honour_skip_append).
    for blk in agg.global_blocks:
        assert isinstance(blk.attn, SDPAAttention)
        blk.attn.forward = partial(_honour_skip_append, blk.attn, _orig=blk.attn.forward)
    model.aggregator = agg
    model.enable_3d_rope = c["enable_3d_rope"]

    ch = c["camera_head"]
    assert ch["dim"] == 2 * E
    model.camera_head = CameraCausalHead(
        dim_in=ch["dim"], trunk_depth=ch["trunk_depth"], num_heads=ch["num_heads"],
        mlp_ratio=ch["mlp_ratio"], num_iterations=c["camera_num_iterations"], **kv)
    dh = c["depth_head"]
    model.depth_head = DPTHead(dim_in=2 * E, patch_size=c["patch_size"], output_dim=2,
                               activation="exp", conf_activation="expp1",
                               features=dh["features"], out_channels=list(dh["out_channels"]))

    layers = list(c["aggregator_output_layers"])

    def _aggregate_features(self, images, num_frame_for_scale=None, sliding_window_size=None,
                            num_frame_per_block=1, **kwargs):
        return self.aggregator(images, selected_idx=layers, num_frame_for_scale=num_frame_for_scale,
                               sliding_window_size=sliding_window_size,
                               num_frame_per_block=num_frame_per_block)

    model._aggregate_features = types.MethodType(_aggregate_features, model)
    return model.eval(), c


@torch.no_grad()
def randomize_(model, seed, bf16_exact=True):
    """Fixed random weights that make every part matter.

    Upstream's init leaves LayerScale at 0.01 and special tokens at 1e-6, which
    would hide most of the network from a parity test. Here each weight gets a
    scale that keeps activations O(1), and LayerScale gains are O(1).
    With bf16_exact, every value is rounded to bfloat16 so that the checkpoint
    can be stored in bfloat16 without changing the function.
    """
    g = torch.Generator().manual_seed(seed)

    def randn(shape):
        return torch.randn(shape, generator=g, dtype=torch.float64)

    for name, p in model.named_parameters():
        shape = tuple(p.shape)
        leaf = name.rsplit(".", 1)[-1]
        if leaf == "gamma":  # LayerScale
            v = 0.4 + 0.4 * torch.rand(shape, generator=g, dtype=torch.float64)
        elif "norm" in name and leaf == "weight" and p.dim() == 1:
            v = 1.0 + 0.2 * randn(shape)
        elif leaf == "bias":
            v = 0.05 * randn(shape)
        elif p.dim() >= 2 and leaf == "weight":
            if isinstance(_module_of(model, name), torch.nn.ConvTranspose2d):
                fan_in = shape[0]  # weight [in, out, kh, kw]; stride == kernel: one tap per output
            else:
                fan_in = math.prod(shape[1:])
            v = randn(shape) / math.sqrt(fan_in)
        else:  # tokens, position embeddings, empty pose token
            v = randn(shape)
        if bf16_exact:
            v = v.to(torch.bfloat16)
        p.copy_(v.to(p.dtype))
    # The field of view goes through a ReLU; keep it positive (~1 rad after
    # the refinement iterations add up) so intrinsics stay finite.
    fc2 = model.camera_head.pose_branch.fc2
    fc2.weight[7:9] *= 0.1
    fc2.bias[7:9] = 0.3
    if bf16_exact:
        fc2.weight.copy_(fc2.weight.to(torch.bfloat16).to(fc2.weight.dtype))
        fc2.bias.copy_(fc2.bias.to(torch.bfloat16).to(fc2.bias.dtype))


def _module_of(model, param_name):
    mod = model
    for part in param_name.split(".")[:-1]:
        mod = getattr(mod, part)
    return mod
