/* arch.c - the architectures infer.h runs, as data: one row per GGUF
   general.architecture (what differs: RoPE pairing, activation, scales,
   norms, sliding windows, experts) and one table of the per-layer tensors
   a model binds, each with its shape and when it is required. model.c
   reads both; the forward pass reads only the description they make.

   To add an architecture: give it a row below (the flags it needs, its
   sliding-window pattern), add any hyperparameter rule it has that is not
   a key (model.c, infer__model_load_hparams), and, if it brings a new
   operation, a flag here, a field in infer_model or infer__layer, and the
   step in forward.c. Tensors the description does not bind are refused. */
#include "internal.h"

static const infer__arch infer__archs[] = {
    /* name, flags, sliding-window pattern and default window, sliding layers' RoPE base, no-RoPE step,
       the recurrent layers' kind, the layers with caches of their own, the layers with a sparse gate */
    {"llama", INFER__A_MOE_OPT, 0, 0, 0, 0, 0, 0, 0},
    {"qwen2", INFER__A_NEOX | INFER__A_QKV_BIAS, 0, 0, 0, 0, 0, 0, 0},
    {"qwen3", INFER__A_NEOX | INFER__A_QK_NORM, 0, 0, 0, 0, 0, 0, 0},
    {"qwen3moe", INFER__A_NEOX | INFER__A_QK_NORM | INFER__A_MOE, 0, 0, 0, 0, 0, 0, 0},
    {"gemma", INFER__A_NEOX | INFER__A_GELU | INFER__A_EMBD_SCALE | INFER__A_Q_SCALE, 0, 0, 0, 0, 0, 0, 0},
    {"gemma2", INFER__A_NEOX | INFER__A_GELU | INFER__A_EMBD_SCALE | INFER__A_Q_SCALE | INFER__A_POST_NORMS |
                   INFER__A_SOFTCAP, 2, 4096, 0, 0, 0, 0, 0},
    {"gemma3", INFER__A_NEOX | INFER__A_GELU | INFER__A_EMBD_SCALE | INFER__A_Q_SCALE | INFER__A_POST_NORMS |
                   INFER__A_QK_NORM, 6, 0, 10000.0f, 0, 0, 0, 0},
    /* phi3's sliding_window key is ignored, as llama.cpp does (its
       converters wrote windows the models were not trained with) */
    {"phi3", INFER__A_NEOX | INFER__A_Q_SCALE | INFER__A_FUSED | INFER__A_LONGROPE, 0, 0, 0, 0, 0, 0, 0},
    {"smollm3", 0, 0, 0, 0, 4, 0, 0, 0},
    /* hybrids: which layers attend is read from the file (model.c) */
    {"lfm2", INFER__A_NEOX | INFER__A_QK_NORM | INFER__A_KV_PATTERN | INFER__A_EMBD_NORM_OUT, 0, 0, 0, 0,
     INFER__LAYER_SHORTCONV, 0, 0},
    {"qwen35", INFER__A_NEOX | INFER__A_QK_NORM | INFER__A_ATTN_INTERVAL | INFER__A_Q_GATE | INFER__A_POST_ATTN_FFN_NORM,
     0, 0, 0, 0, INFER__LAYER_DELTANET, 0, 0},
    {"granitehybrid", INFER__A_KV_PATTERN | INFER__A_GRANITE_SCALES, 0, 0, 0, 0, INFER__LAYER_MAMBA2, 0, 0},
    /* gpt-oss: even layers slide (the window from the file), odd ones see all */
    {"gpt-oss", INFER__A_NEOX | INFER__A_QKV_BIAS | INFER__A_MOE | INFER__A_POST_ATTN_FFN_NORM | INFER__A_SINKS |
                    INFER__A_EXPERT_BIAS | INFER__A_SWIGLU_CLAMP | INFER__A_TOPK_SOFTMAX,
     2, 0, 0, 0, 0, 0, 0},
    /* gemma3n: llama.cpp fixes these whatever the file says: KV for
       layers 0-19 only, the gate sparse on layers 0-9, period 5 (and
       model.c: 4 AltUp streams, LAuReL of rank 64) */
    {"gemma3n", INFER__A_NEOX | INFER__A_GELU | INFER__A_EMBD_SCALE | INFER__A_POST_NORMS | INFER__A_QK_NORM |
                    INFER__A_ALTUP | INFER__A_PLE | INFER__A_V_NORM | INFER__A_FINAL_SOFTCAP | INFER__A_UNSCALED,
     5, 0, 10000.0f, 0, 0, 20, 10},
    /* gemma4: the sliding pattern, head sizes, KV heads and FFN widths per
       layer from the file, KV shared by its last shared_kv_layers layers,
       experts beside the dense FFN where a layer has a router */
    {"gemma4", INFER__A_NEOX | INFER__A_GELU | INFER__A_EMBD_SCALE | INFER__A_POST_NORMS | INFER__A_QK_NORM |
                   INFER__A_PLE | INFER__A_V_NORM | INFER__A_FINAL_SOFTCAP | INFER__A_UNSCALED | INFER__A_MOE_OPT |
                   INFER__A_LAYER_SHAPES | INFER__A_V_FROM_K | INFER__A_MOE_DENSE | INFER__A_OUT_SCALE,
     0, 0, 0, 0, 0, 0, 0},
};
#define INFER__N_ARCHS ((int)(sizeof infer__archs / sizeof infer__archs[0]))

static const infer__arch *infer__arch_find(const char *name) {
    int i;
    for (i = 0; i < INFER__N_ARCHS; i++)
        if (!strcmp(infer__archs[i].name, name)) return &infer__archs[i];
    return NULL;
}

/* "llama, qwen2, ..." for messages */
static void infer__arch_list(char *buf, size_t size) {
    size_t at = 0;
    int i;
    buf[0] = 0;
    for (i = 0; i < INFER__N_ARCHS && at < size; i++)
        at += (size_t)snprintf(buf + at, size - at, "%s%s", i ? ", " : "", infer__archs[i].name);
}

#define INFER__L(f) offsetof(infer__layer, f)
#define INFER__KA (1u << INFER__LAYER_ATTENTION)
#define INFER__KSC (1u << INFER__LAYER_SHORTCONV)
#define INFER__KM2 (1u << INFER__LAYER_MAMBA2)
#define INFER__KDN (1u << INFER__LAYER_DELTANET)
/* suffix, field, shape, when, flag, the layer kinds that have it (0: all) */
static const infer__tensor_spec infer__layer_tensors[] = {
    {"attn_norm.weight", INFER__L(attn_norm), INFER__D_DIM, 0, 0, INFER__T_ALWAYS, 0, 0},
    {"attn_q.weight", INFER__L(wq), INFER__D_DIM, INFER__D_Q_OUT, 0, INFER__T_UNFUSED, 0, INFER__KA},
    {"attn_k.weight", INFER__L(wk), INFER__D_DIM, INFER__D_KV, 0, INFER__T_UNFUSED, 0, INFER__KA},
    {"attn_v.weight", INFER__L(wv), INFER__D_DIM, INFER__D_KV, 0, INFER__T_UNFUSED, 0, INFER__KA},
    {"attn_q.bias", INFER__L(bq), INFER__D_Q, 0, 0, INFER__T_FLAG, INFER__A_QKV_BIAS, INFER__KA},
    {"attn_k.bias", INFER__L(bk), INFER__D_KV, 0, 0, INFER__T_FLAG, INFER__A_QKV_BIAS, INFER__KA},
    {"attn_v.bias", INFER__L(bv), INFER__D_KV, 0, 0, INFER__T_FLAG, INFER__A_QKV_BIAS, INFER__KA},
    {"attn_q_norm.weight", INFER__L(q_norm), INFER__D_HEAD, 0, 0, INFER__T_FLAG, INFER__A_QK_NORM, INFER__KA},
    {"attn_k_norm.weight", INFER__L(k_norm), INFER__D_HEAD, 0, 0, INFER__T_FLAG, INFER__A_QK_NORM, INFER__KA},
    {"attn_output.weight", INFER__L(wo), INFER__D_Q, INFER__D_DIM, 0, INFER__T_ALWAYS, 0, INFER__KA},
    {"attn_output.bias", INFER__L(bo), INFER__D_DIM, 0, 0, INFER__T_OPTIONAL, 0, INFER__KA},
    {"attn_sinks.weight", INFER__L(attn_sinks), INFER__D_HEADS, 0, 0, INFER__T_FLAG, INFER__A_SINKS, INFER__KA},
    {"post_attention_norm.weight", INFER__L(post_attn_norm), INFER__D_DIM, 0, 0, INFER__T_FLAG, INFER__A_POST_NORMS, 0},
    {"ffn_norm.weight", INFER__L(ffn_norm), INFER__D_DIM, 0, 0, INFER__T_UNLESS, INFER__A_POST_ATTN_FFN_NORM, 0},
    {"post_attention_norm.weight", INFER__L(ffn_norm), INFER__D_DIM, 0, 0, INFER__T_FLAG, INFER__A_POST_ATTN_FFN_NORM, 0},
    {"ffn_gate.weight", INFER__L(w_gate), INFER__D_DIM, INFER__D_FFN, 0, INFER__T_DENSE, 0, 0},
    {"ffn_up.weight", INFER__L(w_up), INFER__D_DIM, INFER__D_FFN, 0, INFER__T_DENSE, 0, 0},
    {"ffn_down.weight", INFER__L(w_down), INFER__D_FFN, INFER__D_DIM, 0, INFER__T_DENSE, 0, 0},
    {"ffn_gate_inp.weight", INFER__L(ffn_router), INFER__D_DIM, INFER__D_EXPERTS, 0, INFER__T_EXPERT, 0, 0},
    {"ffn_gate_exps.weight", INFER__L(gate_exps), INFER__D_DIM, INFER__D_EXPERT_FFN, INFER__D_EXPERTS,
     INFER__T_EXPERT, 0, 0},
    {"ffn_up_exps.weight", INFER__L(up_exps), INFER__D_DIM, INFER__D_EXPERT_FFN, INFER__D_EXPERTS, INFER__T_EXPERT,
     0, 0},
    {"ffn_down_exps.weight", INFER__L(down_exps), INFER__D_EXPERT_FFN, INFER__D_DIM, INFER__D_EXPERTS,
     INFER__T_EXPERT, 0, 0},
    {"ffn_gate_inp.bias", INFER__L(router_b), INFER__D_EXPERTS, 0, 0, INFER__T_FLAG, INFER__A_EXPERT_BIAS, 0},
    {"ffn_gate_exps.bias", INFER__L(gate_exps_b), INFER__D_EXPERT_FFN, INFER__D_EXPERTS, 0, INFER__T_FLAG,
     INFER__A_EXPERT_BIAS, 0},
    {"ffn_up_exps.bias", INFER__L(up_exps_b), INFER__D_EXPERT_FFN, INFER__D_EXPERTS, 0, INFER__T_FLAG,
     INFER__A_EXPERT_BIAS, 0},
    {"ffn_down_exps.bias", INFER__L(down_exps_b), INFER__D_DIM, INFER__D_EXPERTS, 0, INFER__T_FLAG,
     INFER__A_EXPERT_BIAS, 0},
    {"post_ffw_norm.weight", INFER__L(post_ffn_norm), INFER__D_DIM, 0, 0, INFER__T_FLAG, INFER__A_POST_NORMS, 0},
    /* Gemma 4's experts beside the dense FFN: their norms and scales */
    {"post_ffw_norm_1.weight", INFER__L(post_ffn_norm_1), INFER__D_DIM, 0, 0, INFER__T_EXPERT_FLAG, INFER__A_MOE_DENSE, 0},
    {"pre_ffw_norm_2.weight", INFER__L(pre_ffn_norm_2), INFER__D_DIM, 0, 0, INFER__T_EXPERT_FLAG, INFER__A_MOE_DENSE, 0},
    {"post_ffw_norm_2.weight", INFER__L(post_ffn_norm_2), INFER__D_DIM, 0, 0, INFER__T_EXPERT_FLAG, INFER__A_MOE_DENSE, 0},
    {"ffn_gate_inp.scale", INFER__L(router_scale), INFER__D_DIM, 0, 0, INFER__T_EXPERT_FLAG, INFER__A_MOE_DENSE, 0},
    {"ffn_down_exps.scale", INFER__L(exps_scale), INFER__D_EXPERTS, 0, 0, INFER__T_EXPERT_FLAG, INFER__A_MOE_DENSE, 0},
    {"layer_output_scale.weight", INFER__L(out_scale), INFER__D_ONE, 0, 0, INFER__T_FLAG_OPTIONAL, INFER__A_OUT_SCALE, 0},
    /* per-layer inputs (gate, projection, norm: Gemma 3n, 4); Gemma 3n's AltUp router and coefficients, LAuReL */
    {"inp_gate.weight", INFER__L(ple_gate), INFER__D_DIM, INFER__D_PLE, 0, INFER__T_FLAG, INFER__A_PLE, 0},
    {"proj.weight", INFER__L(ple_proj), INFER__D_PLE, INFER__D_DIM, 0, INFER__T_FLAG, INFER__A_PLE, 0},
    {"post_norm.weight", INFER__L(ple_norm), INFER__D_DIM, 0, 0, INFER__T_FLAG, INFER__A_PLE, 0},
    {"altup_router.weight", INFER__L(altup_router), INFER__D_DIM, INFER__D_ALTUP, 0, INFER__T_FLAG, INFER__A_ALTUP, 0},
    {"altup_router_norm.weight", INFER__L(altup_router_norm), INFER__D_DIM, 0, 0, INFER__T_FLAG, INFER__A_ALTUP, 0},
    {"altup_predict_coef.weight", INFER__L(altup_predict), INFER__D_ALTUP, INFER__D_ALTUP2, 0, INFER__T_FLAG,
     INFER__A_ALTUP, 0},
    {"altup_correct_coef.weight", INFER__L(altup_correct), INFER__D_ALTUP, INFER__D_ALTUP, 0, INFER__T_FLAG,
     INFER__A_ALTUP, 0},
    {"altup_correct_scale.weight", INFER__L(altup_correct_scale), INFER__D_DIM, 0, 0, INFER__T_FLAG, INFER__A_ALTUP, 0},
    {"laurel_l.weight", INFER__L(laurel_l), INFER__D_DIM, INFER__D_LAUREL, 0, INFER__T_FLAG, INFER__A_ALTUP, 0},
    {"laurel_r.weight", INFER__L(laurel_r), INFER__D_LAUREL, INFER__D_DIM, 0, INFER__T_FLAG, INFER__A_ALTUP, 0},
    {"laurel_post_norm.weight", INFER__L(laurel_norm), INFER__D_DIM, 0, 0, INFER__T_FLAG, INFER__A_ALTUP, 0},
    /* LFM2's short convolution */
    {"shortconv.in_proj.weight", INFER__L(rec_in), INFER__D_DIM, INFER__D_REC_IN, 0, INFER__T_ALWAYS, 0, INFER__KSC},
    {"shortconv.conv.weight", INFER__L(conv), INFER__D_CONV, INFER__D_CONV_CH, 0, INFER__T_ALWAYS, 0, INFER__KSC},
    {"shortconv.out_proj.weight", INFER__L(rec_out), INFER__D_DIM, INFER__D_DIM, 0, INFER__T_ALWAYS, 0, INFER__KSC},
    /* Granite 4.0-H's Mamba2 */
    {"ssm_in.weight", INFER__L(rec_in), INFER__D_DIM, INFER__D_REC_IN, 0, INFER__T_ALWAYS, 0, INFER__KM2},
    {"ssm_conv1d.weight", INFER__L(conv), INFER__D_CONV, INFER__D_CONV_CH, 0, INFER__T_ALWAYS, 0, INFER__KM2 | INFER__KDN},
    {"ssm_conv1d.bias", INFER__L(conv_bias), INFER__D_CONV_CH, 0, 0, INFER__T_ALWAYS, 0, INFER__KM2},
    {"ssm_dt.bias", INFER__L(dt_bias), INFER__D_SSM_HEADS, 0, 0, INFER__T_ALWAYS, 0, INFER__KM2 | INFER__KDN},
    {"ssm_a", INFER__L(ssm_a), INFER__D_ONE, INFER__D_SSM_HEADS, 0, INFER__T_ALWAYS, 0, INFER__KM2},
    {"ssm_d", INFER__L(ssm_d), INFER__D_ONE, INFER__D_SSM_HEADS, 0, INFER__T_ALWAYS, 0, INFER__KM2},
    {"ssm_norm.weight", INFER__L(ssm_norm), INFER__D_NORM_GROUP, INFER__D_GROUPS, 0, INFER__T_ALWAYS, 0,
     INFER__KM2},
    /* Qwen3.5's gated delta-net */
    {"attn_qkv.weight", INFER__L(rec_in), INFER__D_DIM, INFER__D_REC_IN, 0, INFER__T_ALWAYS, 0, INFER__KDN},
    {"attn_gate.weight", INFER__L(rec_gate), INFER__D_DIM, INFER__D_INNER, 0, INFER__T_ALWAYS, 0, INFER__KDN},
    {"ssm_a", INFER__L(ssm_a), INFER__D_SSM_HEADS, 0, 0, INFER__T_ALWAYS, 0, INFER__KDN},
    {"ssm_beta.weight", INFER__L(rec_beta), INFER__D_DIM, INFER__D_SSM_HEADS, 0, INFER__T_ALWAYS, 0, INFER__KDN},
    {"ssm_alpha.weight", INFER__L(rec_alpha), INFER__D_DIM, INFER__D_SSM_HEADS, 0, INFER__T_ALWAYS, 0, INFER__KDN},
    {"ssm_norm.weight", INFER__L(ssm_norm), INFER__D_STATE, 0, 0, INFER__T_ALWAYS, 0, INFER__KDN},
    {"ssm_out.weight", INFER__L(rec_out), INFER__D_INNER, INFER__D_DIM, 0, INFER__T_ALWAYS, 0, INFER__KM2 | INFER__KDN},
};
#undef INFER__L
#undef INFER__KA
#undef INFER__KSC
#undef INFER__KM2
#undef INFER__KDN

static const infer__tensor_spec *infer__arch_layer_tensors(int *n) {
    *n = (int)(sizeof infer__layer_tensors / sizeof infer__layer_tensors[0]);
    return infer__layer_tensors;
}
