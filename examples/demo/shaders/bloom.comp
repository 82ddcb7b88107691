// Bloom in HLSL, named by its stage as many projects name their HLSL: the manifest says
// `language = "hlsl"`. One compute entry point; the keyword picks prefilter, downsample or
// upsample, and HIGH_QUALITY a 4-tap filter.

cbuffer BloomParams : register(b0)
{
    float Threshold;
    float Intensity;
    float2 TexelSize;
};

Texture2D<float4> Source : register(t1);
SamplerState LinearClamp : register(s2);
RWTexture2D<float4> Destination : register(u3);

float4 Fetch(float2 uv)
{
#if defined(HIGH_QUALITY)
    float4 sum = 0;
    sum += Source.SampleLevel(LinearClamp, uv + float2(-1, -1) * TexelSize, 0);
    sum += Source.SampleLevel(LinearClamp, uv + float2(1, -1) * TexelSize, 0);
    sum += Source.SampleLevel(LinearClamp, uv + float2(-1, 1) * TexelSize, 0);
    sum += Source.SampleLevel(LinearClamp, uv + float2(1, 1) * TexelSize, 0);
    return sum * 0.25;
#else
    return Source.SampleLevel(LinearClamp, uv, 0);
#endif
}

[numthreads(8, 8, 1)]
void BloomCS(uint3 id : SV_DispatchThreadID)
{
    float2 uv = (float2(id.xy) + 0.5) * TexelSize;
    float4 color = Fetch(uv);
#if defined(PREFILTER)
    float brightness = max(color.r, max(color.g, color.b));
    color *= max(brightness - Threshold, 0.0) / max(brightness, 1e-4);
#elif defined(UPSAMPLE)
    color *= Intensity;
#endif
    Destination[id.xy] = color;
}
