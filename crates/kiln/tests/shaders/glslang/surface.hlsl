// A lit surface: two entry points, cbuffers, Texture2D + SamplerState, semantics, and
// keyword blocks in the style of Unity's multi_compile (_NORMALMAP, _FOG, _SHADOWS_SOFT).

cbuffer PerFrame : register(b0)
{
    float4x4 ViewProjection;
    float3 LightDirection;
    float FogDensity;
};

cbuffer PerObject : register(b1)
{
    float4x4 World;
    float4 BaseColor;
};

Texture2D AlbedoMap : register(t0);
SamplerState LinearSampler : register(s0);
#if defined(_NORMALMAP)
Texture2D NormalMap : register(t1);
#endif

struct VSInput
{
    float3 position : POSITION;
    float3 normal : NORMAL;
    float2 uv : TEXCOORD0;
};

struct PSInput
{
    float4 position : SV_Position;
    float3 normal : NORMAL;
    float2 uv : TEXCOORD0;
#if defined(_FOG)
    float fog : TEXCOORD1;
#endif
};

PSInput VSMain(VSInput input)
{
    PSInput output;
    float4 world = mul(World, float4(input.position, 1.0));
    output.position = mul(ViewProjection, world);
    output.normal = mul((float3x3)World, input.normal);
    output.uv = input.uv;
#if defined(_FOG)
    output.fog = exp(-FogDensity * output.position.w);
#endif
    return output;
}

float4 PSMain(PSInput input) : SV_Target0
{
    float3 n = normalize(input.normal);
#if defined(_NORMALMAP)
    float3 detail = NormalMap.Sample(LinearSampler, input.uv).xyz * 2.0 - 1.0;
    n = normalize(n + detail);
#endif
    float diffuse = saturate(dot(n, -LightDirection));
#if defined(_SHADOWS_SOFT)
    diffuse = smoothstep(0.0, 1.0, diffuse);
#endif
    float4 color = AlbedoMap.Sample(LinearSampler, input.uv) * BaseColor * diffuse;
#if defined(_FOG)
    color.rgb = lerp(float3(0.5, 0.6, 0.7), color.rgb, input.fog);
#endif
    return color;
}
