// Camera-facing particles, alpha-blended or additive, optionally soft against the depth.
#include "include/common.hlsli"

Texture2D _MainTex : register(t0);
SamplerState sampler_MainTex : register(s0);
#if defined(_SOFTPARTICLES)
Texture2D<float> _CameraDepthTexture : register(t1);
#endif

struct Particle
{
    float3 position : POSITION;
    float4 color : COLOR;
    float2 uv : TEXCOORD0;
};

struct ParticleVaryings
{
    float4 positionCS : SV_Position;
    float4 color : COLOR;
    float2 uv : TEXCOORD0;
};

ParticleVaryings ParticleVertex(Particle input)
{
    ParticleVaryings output;
    output.positionCS = TransformWorldToClip(TransformObjectToWorld(input.position));
    output.color = input.color;
    output.uv = input.uv;
    return output;
}

float4 ParticleFragment(ParticleVaryings input) : SV_Target
{
    float4 color = _MainTex.Sample(sampler_MainTex, input.uv) * input.color;
#if defined(_SOFTPARTICLES)
    float scene = _CameraDepthTexture.Load(int3(input.positionCS.xy, 0));
    color.a *= saturate((scene - input.positionCS.z) * 10.0);
#endif
#if defined(_ADDITIVE)
    return float4(color.rgb * color.a, 0.0);
#else
    return color;
#endif
}
