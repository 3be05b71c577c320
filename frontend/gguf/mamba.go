package gguf

import "github.com/tapml/tapml/frontend/arch/mamba"

// mambaFamily reads GGUF mamba files (Mamba 1) into arch/mamba: no
// attention (head_count and feed_forward_length are 0) but the ssm.*
// sizes of the mixer, whose A llama.cpp's converter stores as -exp(A_log)
// in ssm_a and whose convolution always has a bias. FalconMamba's RMS
// norms of the time step, B and C (ssm.dt_b_c_rms) are refused.
var mambaFamily = family{
	names: tensorNames{
		global: map[string]string{"token_embd.weight": "embeddings.weight", "output_norm.weight": "norm_f.weight", "output.weight": "lm_head.weight"},
		block: map[string]string{
			"attn_norm.weight": "norm.weight", "ssm_in.weight": "mixer.in_proj.weight",
			"ssm_conv1d.weight": "mixer.conv1d.weight", "ssm_conv1d.bias": "mixer.conv1d.bias",
			"ssm_x.weight": "mixer.x_proj.weight", "ssm_dt.weight": "mixer.dt_proj.weight", "ssm_dt.bias": "mixer.dt_proj.bias",
			"ssm_a": "mixer.A", "ssm_d": "mixer.D", "ssm_out.weight": "mixer.out_proj.weight",
		},
		layer: "layers.",
	},
	config: func(f *File, name string) (model, error) {
		k := func(s string) string { return key(name, s) }
		var c mamba.Config
		var ctx int
		var err error
		get := func(p *int, s string, lo int64) {
			if err != nil {
				return
			}
			var n int64
			n, err = f.intKey(k(s), nil, lo, bigDim)
			*p = int(n)
		}
		get(&ctx, "context_length", 1)
		get(&c.Dim, "embedding_length", 1)
		get(&c.Layers, "block_count", 1)
		get(&c.ConvKernel, "ssm.conv_kernel", 2)
		get(&c.Inner, "ssm.inner_size", 1)
		get(&c.State, "ssm.state_size", 1)
		get(&c.DtRank, "ssm.time_step_rank", 1)
		if err != nil {
			return model{}, err
		}
		if v, ok := f.Get(k("ssm.dt_b_c_rms")); ok {
			if on, isBool := v.Bool(); !isBool || on {
				return model{}, f.errorf("metadata %s is %s %s: FalconMamba's norms of the time step, B and C are not supported", k("ssm.dt_b_c_rms"), v.Type, v)
			}
		}
		if c.NormEps, err = f.requiredFloat(k(rmsEps)); err != nil {
			return model{}, err
		}
		if c.Vocab, c.TiedEmbeddings, err = f.vocab(name, c.Dim); err != nil {
			return model{}, err
		}
		c.ConvBias, c.StoredA, c.MaxSeq = true, true, min(ctx, MaxSeqCap)
		return model{config: c, context: ctx, maxSeq: c.MaxSeq}, nil
	},
}
