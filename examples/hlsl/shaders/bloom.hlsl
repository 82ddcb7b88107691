// Bloom as one compute entry point; the pass variant picks prefilter, downsample or upsample.
cbuffer BloomParams : register(b0)
{
    float _Threshold;
    float _Intensity;
    float2 _TexelSize;
};

Texture2D<float4> _Source : register(t0);
SamplerState sampler_LinearClamp : register(s0);
RWTexture2D<float4> _Destination : register(u0);

float4 Sample(float2 uv)
{
#if defined(_HIGH_QUALITY)
    float4 sum = 0;
    sum += _Source.SampleLevel(sampler_LinearClamp, uv + float2(-1, -1) * _TexelSize, 0);
    sum += _Source.SampleLevel(sampler_LinearClamp, uv + float2(1, -1) * _TexelSize, 0);
    sum += _Source.SampleLevel(sampler_LinearClamp, uv + float2(-1, 1) * _TexelSize, 0);
    sum += _Source.SampleLevel(sampler_LinearClamp, uv + float2(1, 1) * _TexelSize, 0);
    return sum * 0.25;
#else
    return _Source.SampleLevel(sampler_LinearClamp, uv, 0);
#endif
}

[numthreads(8, 8, 1)]
void BloomCS(uint3 id : SV_DispatchThreadID)
{
    float2 uv = (float2(id.xy) + 0.5) * _TexelSize;
    float4 color = Sample(uv);
#if defined(PREFILTER)
    float brightness = max(color.r, max(color.g, color.b));
    color *= max(brightness - _Threshold, 0.0) / max(brightness, 1e-4);
#elif defined(UPSAMPLE)
    color *= _Intensity;
#endif
    _Destination[id.xy] = color;
}
