// compare: NORMAL_MAP | NORMAL_MAP ALPHA_CLIP | QUALITY=2
// A material in the style of multi_compile: keyword-driven blocks, two entry points.
#define CONCAT(a, b) a##b
#define REGISTER(kind, n) register(CONCAT(kind, n))
#define SAMPLE(tex, uv) tex.Sample(CONCAT(tex, Sampler), uv)
#define BRACED(init) init
#ifndef QUALITY
#define QUALITY 1
#endif
#define SLOT 3

cbuffer Material : REGISTER(b, 0) {
    float4 _Color;
    float _Cutoff;
};
Texture2D _MainTex : REGISTER(t, 0);
SamplerState _MainTexSampler : REGISTER(s, 0);
#ifdef NORMAL_MAP
Texture2D _BumpMap : REGISTER(t, SLOT);
SamplerState _BumpMapSampler : REGISTER(s, SLOT);
#endif

struct VSIn { float3 pos : POSITION; float2 uv : TEXCOORD0; };
struct PSIn { float4 pos : SV_Position; float2 uv : TEXCOORD0; };

static const float2 offsets[2] = BRACED({ float2(0, 0), float2(1, 1) });

PSIn vert(VSIn v) {
    PSIn o;
    o.pos = float4(v.pos, 1.0);
    o.uv = v.uv + offsets[0];
    return o;
}

float4 frag(PSIn i) : SV_Target {
    float4 c = SAMPLE(_MainTex, i.uv) * _Color;
#ifdef NORMAL_MAP
    c.rgb *= SAMPLE(_BumpMap, i.uv).rgb;
#endif
#if defined(ALPHA_CLIP) && QUALITY > 0
    clip(c.a - _Cutoff);
#elif QUALITY >= 2
    c *= 0.5;
#endif
    int l = __LINE__;
    return c;
}
